"""A generated project-memory workload with known ground truth (deterministic for a seed).

Each project (a code name such as "Aster") has facts about several aspects of it: its database,
where it runs, its CI system, who leads it, and so on. For every queried (project, aspect) there is
one **current** fact stated with high confidence and one to three **stale** facts: notes that
mention the same project and the same kind of thing, with an outdated value, stated with low
confidence. Stale notes tend to be phrased like a direct answer (close to how people ask), while
current facts are often worded as a change, so lexical and semantic similarity alone rank a stale
note first surprisingly often; confidence predicts which fact is relevant. Projects also carry
unqueried facts and meeting notes, which are plausible distractors.

Queries are phrased differently from the facts. The learning groups (judged retrievals, gate 1)
and the holdout groups (gate 2) are disjoint (project, aspect) pairs, and each group's relevant
memories — the current fact — are known, including when a retrieval does not return them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from prme.models.enums import Scope

PROJECT_NAMES: tuple[str, ...] = (
    "Aster", "Basalt", "Cobalt", "Dunmore", "Emberly", "Fjord", "Garnet", "Harbor",
    "Iris", "Juniper", "Kestrel", "Lumen", "Marlin", "Nimbus", "Onyx", "Pollux",
    "Quartz", "Raven", "Sierra", "Tundra", "Umber", "Vesper", "Willow", "Xenon",
    "Yarrow", "Zephyr", "Atlas", "Beacon", "Comet", "Delphi", "Falcon", "Glacier",
    "Helix", "Indigo", "Jasper", "Krypton", "Lotus", "Meridian", "Nova", "Orchid",
    "Pebble", "Quill", "Ridgeway", "Solstice", "Thistle", "Saffron", "Tamarack", "Wren",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Aspect:
    """One kind of fact a project has, with its possible values and phrasings."""

    name: str
    values: tuple[str, ...]
    current: tuple[str, ...]  # templates with {p} (project), {v} (value), {old} (a stale value)
    stale: tuple[str, ...]  # templates with {p} and {v}
    queries: tuple[str, ...]  # templates with {p}


# fmt: off
ASPECTS: tuple[Aspect, ...] = (
    Aspect(
        "database",
        ("PostgreSQL 16", "MySQL 8", "MongoDB 7", "CockroachDB", "MariaDB", "Cassandra",
         "DynamoDB", "SQL Server 2022"),
        ("{p} moved its database from {old} to {v} last quarter.",
         "Since the migration, the {p} database is {v}.",
         "The {p} team confirmed {v} is the database now.",
         "The {p} database runs on {v} after {old} was retired."),
        ("{p} uses {v} as its database.",
         "The {p} database is {v}.",
         "{p} keeps its data in a {v} database."),
        ("Which database does {p} use?",
         "What database is behind {p}?",
         "Where does {p} keep its database?"),
    ),
    Aspect(
        "hosting",
        ("Kubernetes on GKE", "AWS ECS", "Heroku", "Fly.io", "bare-metal servers", "Nomad",
         "AWS Lambda", "Azure App Service"),
        ("{p} hosting was moved from {old} to {v} in the spring.",
         "Since the cutover, {p} is hosted on {v}.",
         "Ops confirmed {p} is hosted on {v} now.",
         "{p} is hosted on {v} after {old} was shut down."),
        ("{p} is hosted on {v}.",
         "The {p} hosting platform is {v}.",
         "{p} production is hosted on {v}."),
        ("Where is {p} hosted?",
         "What hosting does {p} use in production?",
         "Who hosts the {p} deployment?"),
    ),
    Aspect(
        "language",
        ("Rust", "Go", "Python", "TypeScript", "Kotlin", "Java", "Elixir", "C#"),
        ("The {p} code was rewritten from {old} to {v}; the language switch is done.",
         "Since the rewrite, the {p} language is {v}.",
         "The {p} team confirmed the codebase language is {v} now.",
         "{p} uses {v} as its language after the last {old} modules were deleted."),
        ("{p} is written in the {v} language.",
         "The {p} codebase language is {v}.",
         "{p} uses the {v} programming language."),
        ("What programming language is {p} written in?",
         "Which language is the {p} codebase in?",
         "What language do we use for {p}?"),
    ),
    Aspect(
        "ci",
        ("GitHub Actions", "GitLab CI", "Jenkins", "CircleCI", "Buildkite", "Drone",
         "TeamCity", "Azure Pipelines"),
        ("{p} moved its CI from {old} to {v} in March.",
         "Since March, {p} CI builds run on {v}.",
         "The {p} team confirmed CI is {v} now.",
         "{p} CI is {v} after {old} was dropped."),
        ("{p} uses {v} for CI.",
         "The {p} CI system is {v}.",
         "{p} CI runs on {v}."),
        ("What CI system does {p} use?",
         "Which CI runs the {p} builds?",
         "Where does CI for {p} run?"),
    ),
    Aspect(
        "monitoring",
        ("Prometheus and Grafana", "Datadog", "New Relic", "Honeycomb", "Dynatrace",
         "Elastic APM", "Zabbix", "Nagios"),
        ("{p} moved its monitoring from {old} to {v} this year.",
         "Since the switch, {p} is monitored with {v}.",
         "The {p} on-call team confirmed monitoring is {v} now.",
         "{p} monitoring alerts come from {v} after {old} was switched off."),
        ("{p} is monitored with {v}.",
         "The {p} monitoring tool is {v}.",
         "{p} uses {v} for monitoring."),
        ("What monitoring does {p} use?",
         "How is {p} monitored?",
         "Which monitoring tool watches {p}?"),
    ),
    Aspect(
        "auth",
        ("Auth0", "Keycloak", "Okta", "AWS Cognito", "Firebase Auth", "Azure AD B2C",
         "Ory Kratos", "FusionAuth"),
        ("{p} moved its authentication from {old} to {v} during the identity cutover.",
         "Since the cutover, {p} authenticates users with {v}.",
         "The {p} team confirmed the authentication provider is {v} now.",
         "{p} users authenticate through {v} after {old} was retired."),
        ("{p} uses {v} for authentication.",
         "The {p} authentication provider is {v}.",
         "{p} authenticates users with {v}."),
        ("How does {p} authenticate users?",
         "Which authentication provider does {p} use?",
         "What handles authentication for {p}?"),
    ),
    Aspect(
        "queue",
        ("Kafka", "RabbitMQ", "NATS", "Amazon SQS", "Redis Streams", "Google Pub/Sub",
         "Pulsar", "ActiveMQ"),
        ("{p} moved its message queue from {old} to {v} last year.",
         "Since {old} was decommissioned, {p} messages flow through {v}.",
         "The {p} team confirmed the message broker is {v} now.",
         "{p} services pass messages over {v} after the {old} queue was removed."),
        ("{p} uses {v} as its message queue.",
         "The {p} message queue is {v}.",
         "{p} sends messages through {v}."),
        ("What message queue does {p} use?",
         "Which message broker does {p} rely on?",
         "How does {p} queue messages between services?"),
    ),
    Aspect(
        "frontend",
        ("React", "Vue 3", "Svelte", "Angular", "Next.js", "HTMX", "SolidJS", "Lit"),
        ("{p} moved its frontend from {old} to {v} during the redesign.",
         "Since the redesign, the {p} frontend is built with {v}.",
         "The {p} team confirmed the frontend framework is {v} now.",
         "{p} frontend work happens in {v} after the {old} screens were deleted."),
        ("{p} uses {v} for the frontend.",
         "The {p} frontend framework is {v}.",
         "The {p} frontend is built with {v}."),
        ("What frontend framework does {p} use?",
         "Which framework is the {p} frontend built with?",
         "What is the {p} frontend written in?"),
    ),
    Aspect(
        "lead",
        ("Maria Lopez", "Kenji Sato", "Priya Nair", "Tom Becker", "Amara Obi", "Lena Fischer",
         "Diego Ruiz", "Sofia Rossi"),
        ("{v} took over as {p} lead from {old} in January.",
         "Since the reorg, the {p} lead is {v}.",
         "The {p} team confirmed {v} leads it now.",
         "{v} leads {p} after {old} moved to another team."),
        ("{v} leads {p}.",
         "The {p} lead is {v}.",
         "{p} is led by its lead {v}."),
        ("Who leads {p}?",
         "Who is the lead of {p}?",
         "Which person leads the {p} team?"),
    ),
    Aspect(
        "release",
        ("every two weeks", "weekly", "monthly", "every Thursday", "continuously",
         "quarterly", "every six weeks", "twice a week"),
        ("{p} moved from releasing {old} to releasing {v}.",
         "Since the process change, {p} ships a release {v}.",
         "The {p} team confirmed the release cadence is {v} now.",
         "{p} releases go out {v} after the {old} schedule was dropped."),
        ("{p} releases {v}.",
         "The {p} release cadence is {v}.",
         "{p} ships a release {v}."),
        ("How often does {p} release?",
         "What is the release cadence of {p}?",
         "When does {p} ship new releases?"),
    ),
    Aspect(
        "cache",
        ("Redis", "Memcached", "Varnish", "Hazelcast", "an in-process LRU cache", "Caffeine",
         "Apache Ignite", "KeyDB"),
        ("{p} moved its cache from {old} to {v} to cut latency.",
         "Since the latency work, {p} caches data in {v}.",
         "The {p} team confirmed the caching layer is {v} now.",
         "{p} hot reads are cached in {v} after {old} was retired."),
        ("{p} uses {v} as its cache.",
         "The {p} cache is {v}.",
         "{p} caches data in {v}."),
        ("What cache does {p} use?",
         "Which caching layer sits in front of {p}?",
         "How does {p} cache data?"),
    ),
    Aspect(
        "region",
        ("eu-west-1", "us-east-1", "ap-southeast-2", "europe-west4", "us-central1",
         "eu-central-1", "ca-central-1", "sa-east-1"),
        ("{p} moved its cloud region from {old} to {v} for data residency.",
         "Since the move, the {p} region is {v}.",
         "The {p} team confirmed the region is {v} now.",
         "{p} is deployed in the {v} region after leaving {old}."),
        ("{p} is hosted in the {v} region.",
         "The {p} cloud region is {v}.",
         "{p} servers are in the {v} region."),
        ("Which cloud region is {p} in?",
         "In what region do the {p} servers live?",
         "What region is {p} deployed in?"),
    ),
)
# fmt: on

NOTE_TEMPLATES: tuple[str, ...] = (
    "Sprint review for {p}: the team demoed the new onboarding flow.",
    "The {p} standup moved to 10:00 on Mondays.",
    "Budget for {p} was approved for the next two quarters.",
    "{p} had a short outage on Friday; the postmortem is in the wiki.",
    "Design review of the {p} roadmap is scheduled for next week.",
    "The {p} team is hiring two more engineers.",
)

CURRENT_CONFIDENCE = (0.88, 0.97)
STALE_CONFIDENCE = (0.15, 0.45)
NOTE_CONFIDENCE = 0.8


@dataclass(frozen=True, slots=True)
class WorkloadMemory:
    """One memory to store; ``key`` names it in the ground truth."""

    key: str
    content: str
    confidence: float
    project: str
    aspect: str | None
    kind: str  # "current", "stale", "unqueried" or "note"

    def store_item(self, scope: Scope) -> dict[str, object]:
        """The ``store_many`` item for this memory."""
        return {
            "content": self.content,
            "scope": scope.value,
            "node_type": "note" if self.kind == "note" else "fact",
            "confidence": self.confidence,
            "metadata": {"workload_key": self.key},
        }


@dataclass(frozen=True, slots=True)
class WorkloadQuery:
    """A query with its group name and the keys of every relevant memory."""

    group: str
    text: str
    relevant_keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Workload:
    """Memories, learning queries (gate 1) and disjoint holdout queries (gate 2)."""

    seed: int
    scope: Scope
    memories: tuple[WorkloadMemory, ...]
    learning: tuple[WorkloadQuery, ...]
    holdout: tuple[WorkloadQuery, ...]

    def store_items(self) -> list[dict[str, object]]:
        """Every memory as a ``store_many`` item, in key order of generation."""
        return [m.store_item(self.scope) for m in self.memories]


def _confidence(rng: random.Random, bounds: tuple[float, float]) -> float:
    return round(rng.uniform(*bounds), 2)


def _project_memories(
    rng: random.Random, project: str, aspects: Sequence[Aspect], queried: set[str]
) -> list[WorkloadMemory]:
    out: list[WorkloadMemory] = []
    for aspect in aspects:
        values = rng.sample(aspect.values, 4)
        current, stale_values = values[0], values[1 : 1 + rng.randint(1, 3)]
        text = rng.choice(aspect.current).format(p=project, v=current, old=stale_values[0])
        kind = "current" if aspect.name in queried else "unqueried"
        out.append(
            WorkloadMemory(
                key=f"{project}/{aspect.name}/current",
                content=text,
                confidence=_confidence(rng, CURRENT_CONFIDENCE),
                project=project,
                aspect=aspect.name,
                kind=kind,
            )
        )
        templates = rng.sample(aspect.stale, len(stale_values))
        for index, (template, value) in enumerate(zip(templates, stale_values, strict=True)):
            out.append(
                WorkloadMemory(
                    key=f"{project}/{aspect.name}/stale-{index}",
                    content=template.format(p=project, v=value),
                    confidence=_confidence(rng, STALE_CONFIDENCE),
                    project=project,
                    aspect=aspect.name,
                    kind="stale",
                )
            )
    for index, template in enumerate(rng.sample(NOTE_TEMPLATES, 2)):
        out.append(
            WorkloadMemory(
                key=f"{project}/note-{index}",
                content=template.format(p=project),
                confidence=NOTE_CONFIDENCE,
                project=project,
                aspect=None,
                kind="note",
            )
        )
    return out


def generate_workload(
    seed: int = 0,
    *,
    projects: int = 40,
    learning_aspects: int = 3,
    holdout_aspects: int = 1,
    unqueried_aspects: int = 2,
    scope: Scope = Scope.PROJECT,
) -> Workload:
    """Build the workload for ``seed`` (same seed → same workload, byte for byte).

    Args:
        seed: the generator seed.
        projects: how many projects (at most ``len(PROJECT_NAMES)``).
        learning_aspects: queried aspects per project used for judged retrievals (gate 1).
        holdout_aspects: queried aspects per project kept for the holdout (gate 2).
        unqueried_aspects: extra facts per project that no query asks about.
        scope: the scope every memory is stored in.

    Raises:
        ValueError: the counts do not fit the available names and aspects.
    """
    per_project = learning_aspects + holdout_aspects + unqueried_aspects
    if not 1 <= projects <= len(PROJECT_NAMES):
        raise ValueError(f"projects must be between 1 and {len(PROJECT_NAMES)}")
    if learning_aspects < 1 or holdout_aspects < 1 or unqueried_aspects < 0:
        raise ValueError("learning_aspects and holdout_aspects must be >= 1")
    if per_project > len(ASPECTS):
        raise ValueError(f"at most {len(ASPECTS)} aspects per project")
    rng = random.Random(f"prme-workload:{seed}")
    names = rng.sample(PROJECT_NAMES, projects)
    memories: list[WorkloadMemory] = []
    learning: list[WorkloadQuery] = []
    holdout: list[WorkloadQuery] = []
    for project in names:
        aspects = rng.sample(ASPECTS, per_project)
        learn = aspects[:learning_aspects]
        hold = aspects[learning_aspects : learning_aspects + holdout_aspects]
        queried = {a.name for a in (*learn, *hold)}
        memories.extend(_project_memories(rng, project, aspects, queried))
        for target, chosen in ((learning, learn), (holdout, hold)):
            for aspect in chosen:
                target.append(
                    WorkloadQuery(
                        group=f"{project.lower()}/{aspect.name}",
                        text=rng.choice(aspect.queries).format(p=project),
                        relevant_keys=(f"{project}/{aspect.name}/current",),
                    )
                )
    order = list(range(len(memories)))
    rng.shuffle(order)
    return Workload(
        seed=seed,
        scope=scope,
        memories=tuple(memories[i] for i in order),
        learning=tuple(learning),
        holdout=tuple(holdout),
    )


# --------------------------------------------------------------- confirmed facts vs. hearsay
CONFIRMED_CONFIDENCE = (0.86, 0.98)
HEARSAY_CONFIDENCE = (0.45, 0.70)
CONFIRMED_TEMPLATES: tuple[str, ...] = (
    "{p} {a}: {v}.",
    "{p} — {a} is {v}.",
    "Confirmed: {p} {a} {v}.",
)
HEARSAY_TEMPLATES: tuple[str, ...] = (
    "Rumour: {q} Someone said {v}, but nobody has checked.",
    "Pitch for {p}: {q} We could switch to {v}.",
    "Open question from the retro: {q} Maybe {v}?",
    "Unverified: {q} A vendor claims it is {v}.",
)


def generate_confirmation_workload(
    seed: int = 0,
    *,
    projects: int = 30,
    learning_aspects: int = 3,
    holdout_aspects: int = 1,
    scope: Scope = Scope.PROJECT,
) -> Workload:
    """Terse confirmed facts against hearsay that repeats the question (deterministic for a seed).

    For every queried (project, aspect) there is one **confirmed** fact, terse ("Aster database:
    PostgreSQL 16.") with confidence 0.86–0.98, and two or three **unconfirmed** statements —
    rumours, pitches, open questions — that repeat the query's own words with another value and
    carry confidence 0.45–0.70. Lexical and semantic similarity favour the hearsay; confidence
    tells the confirmed fact, the only relevant memory of its group.

    Raises:
        ValueError: the counts do not fit the available names and aspects.
    """
    per_project = learning_aspects + holdout_aspects
    if not 1 <= projects <= len(PROJECT_NAMES):
        raise ValueError(f"projects must be between 1 and {len(PROJECT_NAMES)}")
    if learning_aspects < 1 or holdout_aspects < 1 or per_project > len(ASPECTS):
        raise ValueError(f"1 to {len(ASPECTS)} aspects per project, at least one of each kind")
    rng = random.Random(f"prme-confirmation-workload:{seed}")
    memories: list[WorkloadMemory] = []
    learning: list[WorkloadQuery] = []
    holdout: list[WorkloadQuery] = []
    for project in rng.sample(PROJECT_NAMES, projects):
        for number, aspect in enumerate(rng.sample(ASPECTS, per_project)):
            values = rng.sample(aspect.values, 4)
            query = rng.choice(aspect.queries).format(p=project)
            key = f"{project}/{aspect.name}"
            memories.append(
                WorkloadMemory(
                    key=f"{key}/confirmed",
                    content=rng.choice(CONFIRMED_TEMPLATES).format(
                        p=project, a=aspect.name, v=values[0]
                    ),
                    confidence=_confidence(rng, CONFIRMED_CONFIDENCE),
                    project=project,
                    aspect=aspect.name,
                    kind="current",
                )
            )
            hearsay = rng.sample(HEARSAY_TEMPLATES, rng.randint(2, 3))
            for index, template in enumerate(hearsay):
                memories.append(
                    WorkloadMemory(
                        key=f"{key}/hearsay-{index}",
                        content=template.format(p=project, q=query, v=values[1 + index]),
                        confidence=_confidence(rng, HEARSAY_CONFIDENCE),
                        project=project,
                        aspect=aspect.name,
                        kind="stale",
                    )
                )
            target = learning if number < learning_aspects else holdout
            target.append(
                WorkloadQuery(
                    group=f"{project.lower()}/{aspect.name}",
                    text=query,
                    relevant_keys=(f"{key}/confirmed",),
                )
            )
    order = list(range(len(memories)))
    rng.shuffle(order)
    return Workload(
        seed=seed,
        scope=scope,
        memories=tuple(memories[i] for i in order),
        learning=tuple(learning),
        holdout=tuple(holdout),
    )
