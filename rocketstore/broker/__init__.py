"""The broker process: one MessageStore, the client API, the admin API and replication, by role."""
