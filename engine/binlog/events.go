package binlog

import (
	"fmt"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/braid-cdc/braid/engine/change"
)

// ignoredEvents are the binlog event types that carry nothing a row-based
// change stream needs; the reader reads past them. An event of any other
// type that handle does not read stops the source (unknownEvent): braid
// never skips an event that may hold row changes.
var ignoredEvents = map[replication.EventType]bool{
	// The server stopped; the next file follows.
	replication.STOP_EVENT: true,
	// Values a statement-logged query needs (AUTO_INCREMENT, RAND(),
	// user variables): with binlog_format=ROW the rows carry the values.
	replication.INTVAR_EVENT:   true,
	replication.RAND_EVENT:     true,
	replication.USER_VAR_EVENT: true,
	// Events a replica may ignore by definition (LOG_EVENT_IGNORABLE_F).
	replication.IGNORABLE_EVENT: true,
	// The statement's text that led to the rows events after it
	// (binlog_rows_query_log_events, MariaDB's binlog_annotate_row_events).
	replication.ROWS_QUERY_EVENT:            true,
	replication.MARIADB_ANNOTATE_ROWS_EVENT: true,
	// GTID sets the file starts after, and MariaDB's checkpoints of
	// binlog files still needed for crash recovery.
	replication.PREVIOUS_GTIDS_EVENT:            true,
	replication.MARIADB_GTID_LIST_EVENT:         true,
	replication.MARIADB_BINLOG_CHECKPOINT_EVENT: true,
	// Group replication's certification data and membership changes; a
	// view change is logged inside a transaction of its own (GTID, BEGIN,
	// VIEW_CHANGE, COMMIT), which reads as an empty transaction.
	replication.TRANSACTION_CONTEXT_EVENT: true,
	replication.VIEW_CHANGE_EVENT:         true,
	// MariaDB's marker that the events after it in a file are encrypted;
	// the server decrypts them before sending.
	replication.MARIADB_START_ENCRYPTION_EVENT: true,
}

// unknownEvent is the error for an event braid does not read and cannot
// skip: its type may carry row changes (an event type newer than braid, an
// XA PREPARE, statement-based LOAD DATA) or says changes are missing
// (INCIDENT).
func (p *Reader) unknownEvent(hdr *replication.EventHeader, start change.Position) error {
	what := "braid does not read this event type and stops rather than skip changes it may hold: read this source with a braid that knows it, or start after it"
	switch hdr.EventType {
	case replication.INCIDENT_EVENT:
		what = "the server logged an incident: changes may be missing from its binlog (a replica of it stops here too): check the source, then start after this position"
	case replication.XA_PREPARE_LOG_EVENT:
		what = "braid does not read XA transactions (XA PREPARE logs the rows apart from their commit): finish them without XA, then start after this position"
	case replication.BEGIN_LOAD_QUERY_EVENT, replication.EXECUTE_LOAD_QUERY_EVENT, replication.LOAD_EVENT,
		replication.NEW_LOAD_EVENT, replication.CREATE_FILE_EVENT, replication.APPEND_BLOCK_EVENT,
		replication.EXEC_LOAD_EVENT, replication.DELETE_FILE_EVENT:
		what = "a LOAD DATA logged as a statement: set binlog_format=ROW on the server (for every session), then start after this position"
	}
	return fatal{fmt.Errorf("%w: source %s at %s: binlog event type %d (%s): %s",
		ErrBadEvent, p.spec.Name, start, byte(hdr.EventType), hdr.EventType, what)}
}
