package spec

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Sink is one entry of a spec's sinks: a target the destination's stream
// is applied to, as a consumer of its own (package sink).
type Sink struct {
	// Name names the sink within the destination. Required, unique.
	Name string `yaml:"name" json:"name"`
	// Type is the target's kind: mysql (MySQL and MariaDB), postgres
	// (PostgreSQL), rabbitmq, kafka or redis. Required.
	Type SinkType `yaml:"type" json:"type"`
	// Address is the target's host:port. Required, except for rabbitmq
	// (URL) and kafka (Brokers).
	Address string `yaml:"address,omitempty" json:"address,omitempty"`
	// URL is a rabbitmq sink's broker, amqp://host:port/vhost, without a
	// password (give it as password, password_file or password_env, so
	// that it is sealed and hidden like every other). Required for
	// rabbitmq.
	URL string `yaml:"url,omitempty" json:"url,omitempty"`
	// Brokers are a kafka sink's bootstrap brokers, host:port. Required
	// for kafka.
	Brokers []string `yaml:"brokers,omitempty" json:"brokers,omitempty"`
	// Exchange is a rabbitmq sink's durable topic exchange, declared if
	// missing. Default: braid.
	Exchange string `yaml:"exchange,omitempty" json:"exchange,omitempty"`
	// RoutingKey is a rabbitmq sink's routing key, a template of
	// {database} and {table} (the logical table's). Default:
	// {database}.{table}.
	RoutingKey string `yaml:"routing_key,omitempty" json:"routing_key,omitempty"`
	// Queues is per-table (declare and bind a durable queue per logical
	// table, named as its routing key, with x-single-active-consumer) or
	// none (the default: consumers bind their own).
	Queues string `yaml:"queues,omitempty" json:"queues,omitempty"`
	// Topic is a kafka sink's topic, a template of {database} and {table}
	// or one topic's name. Default: {database}.{table}.
	Topic string `yaml:"topic,omitempty" json:"topic,omitempty"`
	// Key is a redis sink's key template of {database}, {table} and {pk}
	// (the primary key's values, joined by ":"); put a prefix in front to
	// share a Redis. Default: {table}:{pk}.
	Key string `yaml:"key,omitempty" json:"key,omitempty"`
	// Format is how a redis sink stores a row: json (the default, a
	// string) or hash (a field per column).
	Format string `yaml:"format,omitempty" json:"format,omitempty"`
	// TombstoneTTL is how long a redis sink keeps a deleted row's
	// tombstone ({key}:seq), which makes a backfill of it fail. Default:
	// 1h.
	TombstoneTTL Duration `yaml:"tombstone_ttl,omitempty" json:"tombstone_ttl,omitempty"`
	// User and Password log in to the target (default user root, for
	// postgres postgres);
	// PasswordFile and PasswordEnv name where the password is instead, as
	// for a source. At most one of the three.
	User         string `yaml:"user,omitempty" json:"user,omitempty"`
	Password     string `yaml:"password,omitempty" json:"password,omitempty"`
	PasswordFile string `yaml:"password_file,omitempty" json:"password_file,omitempty"`
	PasswordEnv  string `yaml:"password_env,omitempty" json:"password_env,omitempty"`
	// Database is the PostgreSQL database the sink connects to (its
	// target tables are "schema.table" inside it). Default: postgres.
	// MySQL targets name the database in each target table instead.
	Database string `yaml:"database,omitempty" json:"database,omitempty"`
	// Tables maps logical tables to target tables ("database.table" for
	// mysql, "schema.table" for postgres); a logical table not listed
	// goes to the table of its own name.
	Tables []SinkTable `yaml:"tables,omitempty" json:"tables,omitempty"`
	// CreateTables makes the sink create a target table that does not
	// exist from the logical table's schema (for postgres with the type
	// mapping docs/sinks.md documents). Default: false, and a missing
	// target table is an error that stops the sink.
	CreateTables bool `yaml:"create_tables,omitempty" json:"create_tables,omitempty"`
	// Mode is exactly-once (the default: each worker transaction writes
	// the worker's checkpoint with its rows) or at-least-once (for a
	// target where the checkpoint table cannot be written: rows are
	// applied as idempotent upserts and deletes, and the sink's cursor,
	// saved after each batch, is the only record, so a crash applies the
	// changes since it again).
	Mode SinkMode `yaml:"mode,omitempty" json:"mode,omitempty"`
	// Workers is how many workers apply the changes, each change on the
	// worker of its primary key (of its range of 16,384 keys, for one
	// integer column; 1,024 for a sink whose checkpoints an older braid
	// made), each worker in transactions of its own. A sink's
	// checkpoints keep the count: it cannot change. Default: 16.
	Workers int `yaml:"workers,omitempty" json:"workers,omitempty"`
	// Connections (mysql) is how many of the workers' transactions run
	// on the target at once; the others wait their turn with their
	// statements built. MariaDB applied the benchmark's rows with about
	// two thirds of the CPU when 16 workers took turns on 4 connections
	// rather than running at once on 2 cores (bench/sink_test.go); raise
	// it for a target with many cores. Default: 4 (at most workers).
	Connections int `yaml:"connections,omitempty" json:"connections,omitempty"`
	// Batch is how many row changes one statement carries at most: a
	// worker's transaction applies what it was handed since its last (at
	// most 2,048 changes) as runs of INSERTs, UPDATEs and DELETEs of one
	// table, each run as statements of up to Batch rows. Default: 100.
	Batch int `yaml:"batch,omitempty" json:"batch,omitempty"`
	// DDL is apply (the logical DDL is run on the target, once) or ignore.
	// Default: apply.
	DDL string `yaml:"ddl,omitempty" json:"ddl,omitempty"`
	// OriginColumn, when set, names a column of the target table that
	// holds each row's shard table ("source/schema.table") and is part of
	// its primary key, so that two shard tables may write the same key
	// (without it that is an error that stops the sink), and a shard
	// table's TRUNCATE deletes its rows only. A target table the sink
	// creates gets the column. Default: none.
	OriginColumn string `yaml:"origin_column,omitempty" json:"origin_column,omitempty"`
	// MetaDatabase is the target database (for postgres: the schema)
	// that holds the sink's checkpoints (table sink_checkpoint). Default:
	// braid_meta.
	MetaDatabase string `yaml:"meta_database,omitempty" json:"meta_database,omitempty"`
}

// SinkTable maps one logical table to a target table.
type SinkTable struct {
	// From is the logical table, "schema.table".
	From string `yaml:"from" json:"from"`
	// To is the target table, "database.table".
	To string `yaml:"to" json:"to"`
}

func (Sink) example() string {
	return "{name: warehouse, type: mysql, address: 127.0.0.1:3306}"
}

// The sinks' defaults.
const (
	DefaultSinkWorkers     = 16
	DefaultSinkBatch       = 100
	DefaultSinkConnections = 4
)

// SinkType is a sink's kind of target (its spec key type).
type SinkType string

// The sink types braid applies to.
const (
	SinkMySQL    SinkType = "mysql" // MySQL and MariaDB
	SinkPostgres SinkType = "postgres"
	SinkRabbitMQ SinkType = "rabbitmq"
	SinkKafka    SinkType = "kafka"
	SinkRedis    SinkType = "redis"
)

// SinkTypes are the sink types braid applies to, in the order errors
// list them.
var SinkTypes = []SinkType{SinkMySQL, SinkPostgres, SinkRabbitMQ, SinkKafka, SinkRedis}

// Known reports whether t is one of SinkTypes.
func (t SinkType) Known() bool { return slices.Contains(SinkTypes, t) }

// SinkMode is how a sink keeps its place at its target (its spec key
// mode).
type SinkMode string

// The sink modes.
const (
	// SinkExactlyOnce (the default for every type but rabbitmq): each
	// worker transaction writes the worker's checkpoint with its rows.
	SinkExactlyOnce SinkMode = "exactly-once"
	// SinkAtLeastOnce: no checkpoint; the sink's cursor is the only
	// record, and a crash applies the changes since it again.
	SinkAtLeastOnce SinkMode = "at-least-once"
)

// Checkpointed reports whether a sink of mode m keeps checkpoints at its
// target (exactly-once, the mode a sink has when none is given).
func (m SinkMode) Checkpointed() bool { return m != SinkAtLeastOnce }

// The sinks' defaults by type.
const (
	DefaultExchange     = "braid"
	DefaultRoutingKey   = "{database}.{table}"
	DefaultTopic        = "{database}.{table}"
	DefaultRedisKey     = "{table}:{pk}"
	DefaultTombstoneTTL = time.Hour
)

// Where is the sink's target as an operator knows it: its address, url
// or brokers.
func (s Sink) Where() string {
	switch s.Type {
	case SinkRabbitMQ:
		return s.URL
	case SinkKafka:
		return strings.Join(s.Brokers, ",")
	}
	return s.Address
}

// SQL reports whether the sink applies rows to a database (mysql,
// postgres) rather than publishing messages or caching rows.
func (s Sink) SQL() bool { return s.Type == SinkMySQL || s.Type == SinkPostgres }

// Ordered reports whether the sink publishes the stream in order, as
// messages (rabbitmq, kafka): one worker, no checkpoint table.
func (s Sink) Ordered() bool { return s.Type == SinkRabbitMQ || s.Type == SinkKafka }

// ResolvePassword returns the sink's password; a reference is an error,
// as for Source.ResolvePassword.
func (s Sink) ResolvePassword() (string, error) {
	if s.PasswordFile != "" || s.PasswordEnv != "" {
		return "", fmt.Errorf("sink %s: %w", s.Name, errUnresolved)
	}
	return s.Password, nil
}

// Target returns the target table a logical table "schema.table" goes to.
func (s Sink) Target(logical string) string {
	for _, t := range s.Tables {
		if t.From == logical {
			return t.To
		}
	}
	return logical
}

// sinkProblems are the problems of the spec's sinks.
func (s *Spec) sinkProblems(bad func(path, format string, a ...any)) {
	seen := map[string]int{}
	for i, sk := range s.Sinks {
		path := fmt.Sprintf("sinks[%d]", i)
		if m := nameProblem(sk.Name, "warehouse"); m != "" {
			bad(path+".name", "%s", m)
		} else if first, dup := seen[sk.Name]; dup {
			bad(path+".name", "%q is used twice (sinks[%d] has it too): give each sink its own name", sk.Name, first)
		} else {
			seen[sk.Name] = i
		}
		if !sk.Type.Known() {
			bad(path+".type", "%q: want one of %s", sk.Type, joinTypes(SinkTypes))
		}
		switch sk.Type {
		case SinkRabbitMQ:
			if m := amqpURLProblem(sk.URL); m != "" {
				bad(path+".url", "%s", m)
			}
		case SinkKafka:
			if len(sk.Brokers) == 0 {
				bad(path+".brokers", "give the kafka brokers, e.g. [127.0.0.1:9092]")
			}
			for j, b := range sk.Brokers {
				if m := addressProblem(b); m != "" {
					bad(fmt.Sprintf("%s.brokers[%d]", path, j), "%s", m)
				}
			}
		default:
			if m := addressProblem(sk.Address); m != "" {
				bad(path+".address", "%s", m)
			}
		}
		sk.typeProblems(path, bad)
		if countSet(sk.Password, sk.PasswordFile, sk.PasswordEnv) > 1 {
			bad(path, "give at most one of password, password_file and password_env")
		}
		if sk.Workers < 0 || sk.Workers > 256 {
			bad(path+".workers", "%d: want 1 to 256, e.g. %d", sk.Workers, DefaultSinkWorkers)
		}
		if sk.Connections < 0 || sk.Connections > 256 {
			bad(path+".connections", "%d: want 1 to 256, e.g. %d", sk.Connections, DefaultSinkConnections)
		}
		if sk.Batch < 0 || sk.Batch > 10000 {
			bad(path+".batch", "%d: want 1 to 10000, e.g. %d", sk.Batch, DefaultSinkBatch)
		}
		switch sk.DDL {
		case "", "apply", "ignore":
		default:
			bad(path+".ddl", "%q: want apply (the default) or ignore", sk.DDL)
		}
		switch sk.Mode {
		case "", SinkExactlyOnce, SinkAtLeastOnce:
		default:
			bad(path+".mode", "%q: want exactly-once (the default) or at-least-once", sk.Mode)
		}
		if sk.Database != "" && sk.Type != SinkPostgres {
			bad(path+".database", "only a postgres sink has a database: name a mysql target's database in its tables (to: database.table)")
		}
		if sk.OriginColumn != "" && !nameRE.MatchString(sk.OriginColumn) {
			bad(path+".origin_column", "%q: want a column name of letters, digits, _ and -, e.g. _shard", sk.OriginColumn)
		}
		for j, t := range sk.Tables {
			tp := fmt.Sprintf("%s.tables[%d]", path, j)
			if _, _, ok := strings.Cut(t.From, "."); !ok {
				bad(tp+".from", "%q: write the logical table as schema.table, e.g. shop.orders", t.From)
			}
			if _, _, ok := strings.Cut(t.To, "."); !ok {
				if sk.Type == SinkPostgres {
					bad(tp+".to", "%q: write the target table as schema.table, e.g. public.orders", t.To)
				} else {
					bad(tp+".to", "%q: write the target table as database.table, e.g. warehouse.orders", t.To)
				}
			}
		}
	}
}

// typeProblems are the problems of the keys only some types have.
func (sk Sink) typeProblems(path string, bad func(path, format string, a ...any)) {
	only := func(key string, set bool, types ...SinkType) {
		if set && !slices.Contains(types, sk.Type) {
			bad(path+"."+key, "only a %s sink has %s", strings.ReplaceAll(joinTypes(types), ", ", " or "), key)
		}
	}
	only("address", sk.Address != "", SinkMySQL, SinkPostgres, SinkRedis)
	only("url", sk.URL != "", SinkRabbitMQ)
	only("brokers", len(sk.Brokers) > 0, SinkKafka)
	only("exchange", sk.Exchange != "", SinkRabbitMQ)
	only("routing_key", sk.RoutingKey != "", SinkRabbitMQ)
	only("queues", sk.Queues != "", SinkRabbitMQ)
	only("topic", sk.Topic != "", SinkKafka)
	only("key", sk.Key != "", SinkRedis)
	only("format", sk.Format != "", SinkRedis)
	only("tombstone_ttl", sk.TombstoneTTL != 0, SinkRedis)
	only("create_tables", sk.CreateTables, SinkMySQL, SinkPostgres)
	only("connections", sk.Connections != 0, SinkMySQL)
	only("origin_column", sk.OriginColumn != "", SinkMySQL, SinkPostgres)
	only("tables", len(sk.Tables) > 0, SinkMySQL, SinkPostgres)
	// The kafka sink speaks to brokers without SASL or TLS: a password
	// given it would be ignored, and a secured cluster refuse it.
	only("user", sk.User != "", SinkMySQL, SinkPostgres, SinkRabbitMQ, SinkRedis)
	only("password", countSet(sk.Password, sk.PasswordFile, sk.PasswordEnv) > 0, SinkMySQL, SinkPostgres, SinkRabbitMQ, SinkRedis)
	switch sk.Queues {
	case "", "none", "per-table":
	default:
		bad(path+".queues", "%q: want per-table or none (the default)", sk.Queues)
	}
	switch sk.Format {
	case "", "json", "hash":
	default:
		bad(path+".format", "%q: want json (the default) or hash", sk.Format)
	}
	if sk.TombstoneTTL < 0 {
		bad(path+".tombstone_ttl", "%v: want a positive duration, e.g. 1h", time.Duration(sk.TombstoneTTL))
	}
	if sk.Key != "" && !strings.Contains(sk.Key, "{pk}") {
		bad(path+".key", "%q: the key template needs {pk}, e.g. cache:{table}:{pk}", sk.Key)
	}
	if sk.Ordered() && sk.Workers > 1 {
		bad(path+".workers", "%d: a %s sink publishes in stream order with one worker: leave workers out", sk.Workers, sk.Type)
	}
	if sk.Ordered() && sk.Mode == SinkExactlyOnce && sk.Type == SinkRabbitMQ {
		bad(path+".mode", "a rabbitmq sink is at-least-once (consumers de-duplicate by message_id): leave mode out")
	}
}

// joinTypes is ts as a list for a person: "mysql, postgres".
func joinTypes(ts []SinkType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// amqpURLProblem is what is wrong with a rabbitmq sink's url ("": nothing).
func amqpURLProblem(s string) string {
	if s == "" {
		return "give the broker as amqp://host:5672/vhost"
	}
	u, err := url.Parse(s)
	if err != nil {
		// The text is not repeated: it may hold a password.
		return "not a url: want amqp://host:5672/vhost"
	}
	if _, ok := u.User.Password(); ok {
		return "the url holds a password: give it as password, password_file or password_env instead, so that it is sealed and hidden"
	}
	if u.User != nil {
		return fmt.Sprintf("the url names user %q: give it as user instead", u.User.Username())
	}
	if (u.Scheme != "amqp" && u.Scheme != "amqps") || u.Host == "" {
		// Not repeated either: a malformed url may hide a password where
		// a parser does not see one.
		return "want amqp://host:5672/vhost (or amqps://), with a host"
	}
	return ""
}
