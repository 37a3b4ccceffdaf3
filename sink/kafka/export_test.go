package kafka

// ListOffsets is listOffsets, for the tests' consumer: each of a topic's
// n partitions' offset at ts (-2 the log start, -1 the end).
var ListOffsets = listOffsets

// Murmur2 is Kafka's murmur2, to check it against franz-go's.
var Murmur2 = murmur2
