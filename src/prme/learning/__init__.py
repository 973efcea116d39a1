"""Pure learning core: query groups and split, ranking metrics, paired statistics, both gates."""
