package protocol

import "time"

// RequestObserver is told of every request the server dispatches, for
// request metrics (the broker's observe package implements it with
// Kafka's RequestMetrics names). It is called on connection goroutines
// and must be cheap and safe for concurrent use.
type RequestObserver interface {
	// RequestStart is called when a request of apiKey is handed to its handler.
	RequestStart(apiKey int16)
	// RequestEnd is called when the handler returned, took after its
	// RequestStart (acks=all and long-poll waits included, as in Kafka's
	// TotalTimeMs).
	RequestEnd(apiKey int16, took time.Duration)
}

// observeEnd reports the end of a request that started at start; dispatch
// defers it.
func observeEnd(o RequestObserver, apiKey int16, start time.Time) {
	o.RequestEnd(apiKey, time.Since(start))
}
