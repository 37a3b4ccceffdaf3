package wire

// ErrorBody is the body of every answer whose status is not 2xx.
type ErrorBody struct {
	// Error is the server's explanation, one sentence for a person: what
	// is wrong and, where it can tell, what to do about it.
	Error string `json:"error"`
	// ID, on a 500, names the node's log line that holds the detail
	// (error_id); the answer itself says nothing of it.
	ID string `json:"id,omitempty"`
}
