//! Token ring, replication and the coordinator. Built by the cluster issue.
