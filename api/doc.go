// Package api serves destinations' streams to consumers: canal's TCP
// protocol (package api/canal) and braid's native HTTP API (package
// api/native) read the same engine.Store of a destination, each client id
// with its own batches and cursor.
package api
