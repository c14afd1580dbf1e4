package metrics

// CallbackEvent is the event Callback writes for c, with store the store
// calls' durations in seconds: the generic form of the fast path, which
// the tests hold it to.
func (r *EMF) CallbackEvent(c Callback, store []float64, cold bool) EMFEvent {
	return r.callbackEvent(r.callbackShape(c, len(store) > 0, cold), c.Duration.Seconds(), store)
}

// SetServed sets whether the process has served a request, i.e. whether
// the next Callback is warm.
func (r *EMF) SetServed(v bool) { r.served.Store(v) }
