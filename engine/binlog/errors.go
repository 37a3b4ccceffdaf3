package binlog

import "errors"

// Sentinel errors. Reader errors wrap one of these with the source, the
// server address and, for errors about an event, its position; the text says
// what to do.
var (
	// ErrAccessDenied: the server refused the user or password.
	ErrAccessDenied = errors.New("binlog: access denied")
	// ErrUnreachable: no connection to the server could be made.
	ErrUnreachable = errors.New("binlog: server unreachable")
	// ErrBinlogDisabled: the server does not write a binary log.
	ErrBinlogDisabled = errors.New("binlog: binary log disabled")
	// ErrBinlogFormat: binlog_format is not ROW.
	ErrBinlogFormat = errors.New("binlog: binlog_format is not ROW")
	// ErrPurged: the start position is no longer on the server.
	ErrPurged = errors.New("binlog: binlog purged")
	// ErrSchemaUnknown: a row's table has no known schema at its position.
	ErrSchemaUnknown = errors.New("binlog: table schema unknown")
	// ErrColumnCount: a row has a different number of columns than the
	// schema known at its position.
	ErrColumnCount = errors.New("binlog: column count mismatch")
	// ErrClearText: the server asked for the password in a form it could
	// read (mysqlauth), and braid refused to send it.
	ErrClearText = errors.New("binlog: password not sent")
	// ErrBadEvent: the server sent an event braid cannot decode.
	ErrBadEvent = errors.New("binlog: bad binlog event")
)

// fatal marks errors that retrying cannot fix; the reader stops on them.
type fatal struct{ error }

func (f fatal) Unwrap() error { return f.error }

func isFatal(err error) bool {
	var f fatal
	return errors.As(err, &f)
}
