package cluster

// A SettingError is a Config a node cannot start with. Fields are the
// Config fields at fault ("Name", "TLS"), so that the command that owns
// the flags can say which of them set those fields: the error itself
// names no flag.
type SettingError struct {
	Fields []string
	Err    error
}

func (e *SettingError) Error() string { return e.Err.Error() }

func (e *SettingError) Unwrap() error { return e.Err }
