"""The workload layer: a job (model, layout, cluster, variability) and its step DAG."""
