"""IndexFiles: messages by key and by unique id (`topic#key` hashes), RocketMQ's layout."""
