"""The preset zlib dictionary of stored receipts (:mod:`prme.storage.payloads`).

Every receipt's canonical JSON repeats the same keys, settings and candidate layout; with
them preset, zlib codes a receipt's first occurrences as references too. A stream names its
dictionary by Adler-32 (RFC 1950), and a receipt is read with the dictionary it was written
with, so these bytes never change: a better dictionary would be a new constant, added to
:data:`prme.storage.payloads.DICTIONARIES`, never an edit of this one. (The values in it are
typical ones, not anyone's data; what matters is the text around them.)
"""

from __future__ import annotations

RECEIPT_DICTIONARY_V1 = (
    b'{"context_sha256":"","execution":{"features":{"embedder":{"dimension":256,"model":"signe'
    b'd-feature-hashing","provider":"hash","version":"1"},"entity_extractor":"capitalised-v1",'
    b'"feature_schema":2,"lexical":{"backend":"sqlite-fts5-bm25","bm25":{"b":0.75,"idf":"fts5"'
    b',"k1":1.2,"statistics":"owner"},"normalization":"minmax","tokenizer":"porter unicode61 '
    b'remove_diacritics 2"},"storage":"sqlite","vector_search":{"chunk_rows":32768,"connectivi'
    b'ty":48,"exact_below_rows":131072,"expansion_add":256,"expansion_search":512,"library":"u'
    b'search 2.26.6","max_segment_chunks":8,"method":"usearch-hnsw","metric":"cos","quantizati'
    b'on":"i8","rescores_other_channels":true}},"inputs":{"epistemic_weights":{"asserted":0.9,'
    b'"conditional":0.5,"deprecated":0.1,"hypothetical":0.3,"inferred":0.7,"observed":1.0,"unv'
    b'erified":0.5},"event_time_from":null,"event_time_to":null,"exclude_node_types":null,"gra'
    b'ph_max_candidates":150,"graph_max_hops":3,"include_cross_scope":true,"knowledge_at":null'
    b',"lexical_k":500,"max_per_evidence":null,"max_per_source":null,"pinned_limit":500,"ranki'
    b'ng_multipliers":null,"ranking_profile":{"profile_id":null,"reason":null,"status":"none"}'
    b',"source_types":null,"unverified_confidence_threshold":0.3,"vector_k":500},"outcomes":{"'
    b'candidates_filtered":0,"candidates_generated":{"graph":0,"lexical":500,"merged":1255,"pi'
    b'nned":500,"vector":500},"candidates_included":20,"cross_scope_hint_count":0,"tokens_used'
    b'":340},"schema_version":1},"min_score":null,"pack":{"pack_id":"","write_seq":1009},"pack'
    b'ing":{"context_format":"plain_lines_v1","token_budget":4096,"tokenizer":"prme-regex-v1"}'
    b',"query":"","ranking_multipliers":null,"ranking_policy":"score_path_id","reference_time"'
    b':"2026-09-01T00:00:00Z","request_id":"","result_limit":20,"retrieval_mode":"default","sc'
    b'hema_version":2,"scopes":null,"scoring":{"current_update_multiplier":1.3,"fusion":"weigh'
    b'ted","graph_specificity":"hop_idf","node_type_boost":{"decision":1.15,"fact":1.15,"instr'
    b'uction":1.15,"preference":1.15,"summary":1.1},"recency_lambda":0.02,"relevance_floor":0.'
    b'35,"rrf_k":null,"rrf_recency_boost":null,"rrf_tie_break":null,"temporal_boost":0.15,"w_c'
    b'onfidence":0.15,"w_epistemic":0.05,"w_graph":0.2,"w_lexical":0.2,"w_paths":0.0,"w_recenc'
    b'y":0.1,"w_salience":0.1,"w_semantic":0.25},"time_from":null,"time_to":null,"user_id":"",'
    b'"weights":{"current_update_multiplier":1.3,"fusion":"weighted","graph_specificity":"hop_'
    b'idf","node_type_boost":{"decision":1.15,"fact":1.15,"instruction":1.15,"preference":1.15'
    b',"summary":1.1},"recency_lambda":0.02,"relevance_floor":0.35,"rrf_k":null,"rrf_recency_b'
    b'oost":null,"rrf_tie_break":null,"temporal_boost":0.15,"w_confidence":0.15,"w_epistemic":'
    b'0.05,"w_graph":0.2,"w_lexical":0.2,"w_paths":0.0,"w_recency":0.1,"w_salience":0.1,"w_sem'
    b'antic":0.25}}{"candidates":[{"content_sha256":"","has_content":true,"in_context":true,"n'
    b'ode_id":"","node_type":"fact","paths":["VECTOR"],"rank_fusion":{"epistemic_factor":0.9,"'
    b'lexical_rank":null,"lexical_weight":1.0,"node_type_factor":1.0,"recency_boost_factor":nu'
    b'll,"semantic_rank":1,"semantic_weight":1.0,"temporal_factor":1.0,"tie_break":null},"scop'
    b'e":"personal","score":0.0,"semantic_relevance":0.0,"token_cost":16,"trace":{"composite_s'
    b'core":0.0,"confidence":0.0,"epistemic_weight":0.9,"graph_proximity":0.0,"lexical_relevan'
    b'ce":0.0,"node_type_boost":1.0,"path_score":0.3333333333333333,"recency_factor":0.0,"sali'
    b'ence":0.0,"semantic_similarity":0.0,"temporal_affinity":0.0}},{"content_sha256":"","has_'
    b'content":true,"in_context":true,"node_id":"","node_type":"decision","paths":["GRAPH","LE'
    b'XICAL","VECTOR"],"rank_fusion":null,"scope":"project","score":0.5,"semantic_relevance":n'
    b'ull,"token_cost":17,"trace":{"composite_score":0.5,"confidence":0.8,"epistemic_weight":1'
    b'.0,"graph_proximity":0.0,"lexical_relevance":1.0,"node_type_boost":1.15,"path_score":0.6'
    b'666666666666666,"recency_factor":1.0,"salience":0.5,"semantic_similarity":0.0,"temporal_'
    b'affinity":0.0}}]}'
)
