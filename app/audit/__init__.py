"""The audit log: who did what, when and from where, appended in the action's transaction."""
