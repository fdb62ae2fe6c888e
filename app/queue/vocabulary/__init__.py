"""The queue's vocabulary: job states and the state graph, the values passed between the
layers (jobs, actors, settings), the errors, trace context and time formats."""
