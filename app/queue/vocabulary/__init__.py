"""The queue's vocabulary: job states and the state graph, the values passed between the
layers (jobs, actors), the errors, trace context and time formats."""
