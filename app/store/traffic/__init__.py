"""The prediction log's persistence: logged predictions, their outcomes, reads into arrays,
daily partitions and upkeep."""
