"""Which layers go on which laptop: pure numbers in, a plan out (planner, split_search, fit), the plan in words
(words), and records, the one module that turns database rows into the planner's machines and plans back."""
