package kafka

// Murmur2 is Kafka's murmur2, to check it against franz-go's.
var Murmur2 = murmur2
