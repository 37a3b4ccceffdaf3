package mysqlsource

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/server"
	"github.com/pingcap/tidb/pkg/parser"
)

// session is one client connection: its variables, its default database,
// and the replication state of a dump. It implements go-mysql's
// server.Handler; the replication commands arrive through
// HandleOtherCommand, whose raw packet the session reads itself (go-mysql's
// own parsing of COM_BINLOG_DUMP_GTID knows no tagged GTIDs and misreads a
// file name), and whose stream it writes itself.
type session struct {
	s    *Server
	conn *server.Conn
	nc   net.Conn // the socket under conn, closed by kill

	vars    map[string]string // session values of system variables
	user    map[string]any    // user variables, @name
	db      string
	replica *Replica
	parser  *parser.Parser
	now     time.Time // the running statement's start

	// Set when a dump starts.
	out         *bufio.Writer // the events' buffer
	replicaAlg  string
	heartbeat   time.Duration
	heartbeatV2 bool

	dead     chan struct{}
	killOnce sync.Once
}

// kill ends the connection, as KILL does: a dump waiting for events
// stops, a read in progress fails.
func (c *session) kill() {
	c.killOnce.Do(func() {
		close(c.dead)
		if c.nc != nil {
			c.nc.Close()
		}
	})
}

// UseDB implements server.Handler (COM_INIT_DB).
func (c *session) UseDB(db string) error {
	if !c.s.hasSchema(db) {
		return mysql.NewDefaultError(mysql.ER_BAD_DB_ERROR, db)
	}
	c.db = db
	return nil
}

// HandleQuery implements server.Handler (COM_QUERY).
func (c *session) HandleQuery(q string) (*mysql.Result, error) {
	cols, rows, err := c.query(q)
	if err != nil {
		return nil, err
	}
	if cols == nil {
		return nil, nil // OK
	}
	return textResult(cols, rows), nil
}

// HandleFieldList implements server.Handler (COM_FIELD_LIST, deprecated).
func (c *session) HandleFieldList(table, wildcard string) ([]*mysql.Field, error) {
	return nil, mysql.NewDefaultError(mysql.ER_NOT_SUPPORTED_YET, "COM_FIELD_LIST")
}

// prepared is a prepared statement: its text with ? placeholders.
type prepared struct{ query string }

// HandleStmtPrepare implements server.Handler: the statement runs when
// executed, its parameters substituted as literals; the column count of a
// SELECT or SHOW is the one it gives with NULL parameters (a dry run: no
// other statement runs before it is executed).
func (c *session) HandleStmtPrepare(q string) (params, columns int, ctx any, err error) {
	params = countPlaceholders(q)
	word, _, _ := strings.Cut(trimStatement(q), " ")
	if w := strings.ToUpper(word); w != "SELECT" && w != "SHOW" {
		return params, 0, &prepared{query: q}, nil
	}
	args := make([]any, params)
	if cols, _, err := c.query(substitute(q, args)); err == nil {
		columns = len(cols)
	} else if me, ok := err.(*mysql.MyError); ok && me.Code == mysql.ER_NOT_SUPPORTED_YET {
		return 0, 0, nil, err
	}
	return params, columns, &prepared{query: q}, nil
}

// HandleStmtExecute implements server.Handler.
func (c *session) HandleStmtExecute(ctx any, q string, args []any) (*mysql.Result, error) {
	cols, rows, err := c.query(substitute(ctx.(*prepared).query, args))
	if err != nil {
		return nil, err
	}
	if cols == nil {
		return nil, nil
	}
	return binaryResult(cols, rows)
}

// HandleStmtClose implements server.Handler.
func (c *session) HandleStmtClose(any) error { return nil }

// HandleOtherCommand implements server.Handler: the replication commands.
func (c *session) HandleOtherCommand(cmd byte, data []byte) error {
	switch cmd {
	case mysql.COM_REGISTER_SLAVE:
		r, err := parseRegister(data)
		if err != nil {
			return err
		}
		if v, ok := c.user["replica_uuid"]; ok && v != nil {
			r.UUID = text(v)
		} else if v, ok := c.user["slave_uuid"]; ok && v != nil {
			r.UUID = text(v)
		}
		c.s.mu.Lock()
		c.replica = &r
		c.s.replicas[r.ServerID] = r
		c.s.mu.Unlock()
		return nil
	case mysql.COM_BINLOG_DUMP:
		req, err := parseDump(data)
		if err != nil {
			return err
		}
		return c.dump(req)
	case mysql.COM_BINLOG_DUMP_GTID:
		req, err := parseDumpGTID(data)
		if err != nil {
			return err
		}
		return c.dump(req)
	case mysql.COM_SET_OPTION, mysql.COM_RESET_CONNECTION:
		return nil
	}
	c.s.mu.Lock()
	c.s.unknown = append(c.s.unknown, fmt.Sprintf("command 0x%02x", cmd))
	c.s.mu.Unlock()
	return mysql.NewError(mysql.ER_UNKNOWN_COM_ERROR, "Unknown command")
}

// parseRegister reads COM_REGISTER_SLAVE: server_id, host, user,
// password, port, rank, source id.
func parseRegister(data []byte) (Replica, error) {
	var r Replica
	if len(data) < 4 {
		return r, mysql.ErrMalformPacket
	}
	r.ServerID = binary.LittleEndian.Uint32(data)
	data = data[4:]
	str := func() (string, bool) {
		if len(data) < 1 || len(data) < 1+int(data[0]) {
			return "", false
		}
		s := string(data[1 : 1+int(data[0])])
		data = data[1+int(data[0]):]
		return s, true
	}
	var ok bool
	if r.Host, ok = str(); !ok {
		return r, mysql.ErrMalformPacket
	}
	for range 2 { // user, password
		if _, ok = str(); !ok {
			return r, mysql.ErrMalformPacket
		}
	}
	if len(data) >= 2 {
		r.Port = binary.LittleEndian.Uint16(data)
	}
	return r, nil
}

// countPlaceholders counts the ? outside quotes.
func countPlaceholders(q string) int {
	n := 0
	forEachOutsideQuotes(q, func(i int) {
		if q[i] == '?' {
			n++
		}
	})
	return n
}

// forEachOutsideQuotes calls f with the index of every byte of q outside
// '...', "..." and `...`.
func forEachOutsideQuotes(q string, f func(int)) {
	var quote byte
	for i := 0; i < len(q); i++ {
		ch := q[i]
		switch {
		case quote != 0:
			if ch == '\\' && quote != '`' {
				i++
			} else if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"' || ch == '`':
			quote = ch
		default:
			f(i)
		}
	}
}

// substitute puts args as SQL literals in place of q's placeholders.
func substitute(q string, args []any) string {
	var b strings.Builder
	k := 0
	last := 0
	forEachOutsideQuotes(q, func(i int) {
		if q[i] != '?' || k >= len(args) {
			return
		}
		b.WriteString(q[last:i])
		b.WriteString(literal(args[k]))
		k++
		last = i + 1
	})
	b.WriteString(q[last:])
	return b.String()
}

// literal is v as an SQL literal.
func literal(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case int64, int32, int16, int8, int, uint64, uint32, uint16, uint8, uint:
		return fmt.Sprint(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case []byte:
		return quoteString(string(x))
	case mysql.TypedBytes: // go-mysql's server passes string parameters so
		return quoteString(string(x.Bytes))
	default:
		return quoteString(fmt.Sprint(x))
	}
}

func quoteString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\x00", `\0`, "\n", `\n`, "\r", `\r`, "\x1a", `\Z`)
	return "'" + r.Replace(s) + "'"
}

// textResult is a text-protocol result set: each column's type from its
// first non-NULL value, values as text.
func textResult(cols []string, rows [][]any) *mysql.Result {
	rs := mysql.NewResultset(len(cols))
	for i, name := range cols {
		f := &mysql.Field{Name: []byte(name), OrgName: []byte(name), Charset: 255, Type: mysql.MYSQL_TYPE_VAR_STRING}
		for _, row := range rows {
			if row[i] != nil {
				setFieldType(f, row[i])
				break
			}
		}
		rs.Fields[i] = f
	}
	for _, row := range rows {
		var data []byte
		for _, v := range row {
			if v == nil {
				data = append(data, 0xfb)
				continue
			}
			data = append(data, mysql.PutLengthEncodedString([]byte(text(v)))...)
		}
		rs.RowDatas = append(rs.RowDatas, data)
	}
	return mysql.NewResult(rs)
}

func setFieldType(f *mysql.Field, v any) {
	switch v.(type) {
	case int64:
		f.Type, f.Charset, f.Flag, f.ColumnLength = mysql.MYSQL_TYPE_LONGLONG, 63, mysql.BINARY_FLAG, 21
	case uint64:
		f.Type, f.Charset, f.Flag, f.ColumnLength = mysql.MYSQL_TYPE_LONGLONG, 63, mysql.BINARY_FLAG|mysql.UNSIGNED_FLAG, 20
	case float64:
		f.Type, f.Charset, f.Flag, f.ColumnLength, f.Decimal = mysql.MYSQL_TYPE_DOUBLE, 63, mysql.BINARY_FLAG, 23, 31
	case time.Time:
		f.Type, f.Charset, f.Flag, f.ColumnLength = mysql.MYSQL_TYPE_DATETIME, 63, mysql.BINARY_FLAG, 19
	case []byte:
		f.Type, f.Charset, f.Flag = mysql.MYSQL_TYPE_BLOB, 63, mysql.BINARY_FLAG
	}
}

// binaryResult is a binary-protocol result set (an executed prepared
// statement); every row's values keep their column's first type.
func binaryResult(cols []string, rows [][]any) (*mysql.Result, error) {
	conv := make([][]any, len(rows))
	for i, row := range rows {
		conv[i] = make([]any, len(row))
		for j, v := range row {
			switch x := v.(type) {
			case time.Time:
				conv[i][j] = x.Format(time.DateTime)
			case int64, uint64, string, []byte, nil:
				conv[i][j] = x
			case float64:
				if math.IsNaN(x) {
					conv[i][j] = nil
				} else {
					conv[i][j] = x
				}
			default:
				conv[i][j] = text(x)
			}
		}
	}
	rs, err := mysql.BuildSimpleBinaryResultset(cols, conv)
	if err != nil {
		return nil, err
	}
	return mysql.NewResult(rs), nil
}
