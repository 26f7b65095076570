"""What `bench.edge_fuzz` and `bench.edge_attacks` share: the brokers they start, what they watch on
them, and the inputs they make for both protocols (issue 30)."""
