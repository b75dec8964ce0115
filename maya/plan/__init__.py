"""Planning: the TrainingPlan schema, the configuration search and the recommendation (``maya plan`` and the operator share it)."""
