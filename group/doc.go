// Package group will read many sources as one destination: a parser per
// source, routing of shard tables to logical tables, and the merge of their
// transactions through a priority queue in commit-time order with per-source
// watermarks (canal's GroupEventParser and GroupEventSink, done right).
//
// Not built yet: see issue 3. Until then `braid capture` reads one source.
package group
