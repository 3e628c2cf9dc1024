package kvidx

import "sync"

// callGate keeps an indexer's library handle alive while calls use it and frees it once the
// indexer is closed and no call uses it any more. Unlike a read-write lock it never makes a
// call wait: a call that begins after Close is refused (it sees nilHandle), so a call made
// from inside another one (a snapshot's io.Writer or io.Reader calling back into the indexer)
// cannot queue behind a Close that waits for the outer call.
type callGate struct {
	mu sync.Mutex
	// changed is broadcast when the last call leaves and when a call starts running the
	// caller's writer or reader.
	changed sync.Cond
	h       handle // nilHandle once freed
	// inflight counts the calls between enter and leave, refused ones included.
	inflight int
	// callbacks counts the calls running the caller's writer or reader right now.
	callbacks int
	closing   bool
}

// enter begins a call: it returns the handle to use, or nilHandle once Close has begun. Every
// enter is paired with a leave, whatever it returned.
func (g *callGate) enter() handle {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight++
	if g.closing {
		return nilHandle
	}
	return g.h
}

// leave ends a call; the last call out of a closed indexer frees its handle.
func (g *callGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	if g.inflight == 0 {
		if g.closing {
			g.freeLocked()
		}
		g.changed.Broadcast()
	}
}

// callbackBegin and callbackEnd bracket the run of a caller's writer or reader inside a call.
func (g *callGate) callbackBegin() {
	g.mu.Lock()
	g.callbacks++
	g.changed.Broadcast()
	g.mu.Unlock()
}

func (g *callGate) callbackEnd() {
	g.mu.Lock()
	g.callbacks--
	g.mu.Unlock()
}

// close refuses later calls and frees the handle once no call is in flight. It waits for the
// calls in flight, except while one of them runs the caller's writer or reader (which may be
// the caller of close itself): then the last call to leave frees the handle. It reports
// whether this was the first close.
func (g *callGate) close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return false
	}
	g.closing = true
	for g.inflight > 0 && g.callbacks == 0 {
		g.changed.Wait()
	}
	if g.inflight == 0 {
		g.freeLocked()
	}
	return true
}

func (g *callGate) freeLocked() {
	if g.h != nilHandle {
		freeHandle(g.h)
		g.h = nilHandle
	}
}
