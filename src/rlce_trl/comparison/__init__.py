"""The paper's comparison (Table 1): its numbers (`paper`) and `rlce-trl compare`, which trains every (method, seed)
cell of a task, evaluates each run's best-on-validation checkpoint on the test split and writes the table
(`command`)."""
