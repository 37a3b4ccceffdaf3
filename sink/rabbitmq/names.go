package rabbitmq

import "strings"

// A topic exchange splits a routing key into words at "." and reads a
// binding's "*" as any one word and "#" as any words. The names in a
// routing key come from whoever writes to a shard, and with queues:
// per-table the same key binds the table's queue: a table named # bound a
// queue that received every other table's messages, one named a.b would
// take the messages of database a's table b... So RoutingKey puts each
// name in percent-encoded, those characters and the escape itself
// (. → %2E, * → %2A, # → %23, % → %25): a name never adds a word or a
// wildcard, two names never meet, and a name without them (every
// ordinary one) is as it was, {database}.{table}.

// nameEscaper escapes a name for a routing key.
var nameEscaper = strings.NewReplacer("%", "%25", ".", "%2E", "*", "%2A", "#", "%23")

// escapeName is name as a routing key holds it.
func escapeName(name string) string {
	if !strings.ContainsAny(name, "%.*#") {
		return name
	}
	return nameEscaper.Replace(name)
}

// RoutingKey is the routing key of logical table database.table under
// template tmpl ({database} and {table} replaced by the names, escaped:
// see escapeName).
func RoutingKey(tmpl, database, table string) string {
	return strings.NewReplacer("{database}", escapeName(database), "{table}", escapeName(table)).Replace(tmpl)
}

// QueueName is the per-table queue of routing key key: the key itself,
// but for one that starts with "amq.", which the broker keeps for its own
// queues and refuses to declare: its "a" is percent-encoded (%61mq.), as
// an escaped name can never spell it.
func QueueName(key string) string {
	if strings.HasPrefix(key, "amq.") {
		return "%61" + key[1:]
	}
	return key
}
