package wire

// ErrorBody is the body of every answer whose status is not 2xx.
type ErrorBody struct {
	// Error is the server's explanation, one sentence for a person: what
	// is wrong and, where it can tell, what to do about it.
	Error string `json:"error"`
}
