package main

import (
	"errors"
	"sync/atomic"
)

// byteBudget bounds the bytes that requests hold at once across the server: bodies being
// read and the ids decoded from them (-max-inflight-bytes). Requests take bytes from it as
// they grow and never wait for them: a request that does not fit is refused.
type byteBudget struct {
	limit   int64
	inUse   atomic.Int64
	peak    atomic.Int64  // the highest inUse ever reached
	refused atomic.Uint64 // requests refused for want of bytes (503)
}

// Errors of reservation.take.
var (
	// errOverloaded: the bytes are held by other requests; the request may be retried.
	errOverloaded = errors.New("too many request bytes in flight (-max-inflight-bytes): retry later")
	// errNeedsTooMuch: the request alone needs more than the whole budget.
	errNeedsTooMuch = errors.New("the decoded request needs more memory than -max-inflight-bytes allows")
)

func newByteBudget(limit int64) *byteBudget { return &byteBudget{limit: limit} }

// tryTake takes n bytes if they fit under the limit.
func (b *byteBudget) tryTake(n int64) bool {
	for {
		cur := b.inUse.Load()
		if cur+n > b.limit {
			return false
		}
		if b.inUse.CompareAndSwap(cur, cur+n) {
			for {
				p := b.peak.Load()
				if cur+n <= p || b.peak.CompareAndSwap(p, cur+n) {
					return true
				}
			}
		}
	}
}

// reservation is one request's share of a byteBudget; release gives it all back.
type reservation struct {
	b    *byteBudget
	held int64
}

func (b *byteBudget) reserve() *reservation { return &reservation{b: b} }

// take adds n bytes to the request's share, or fails with errOverloaded (other requests hold
// the rest) or errNeedsTooMuch (the request alone would exceed the limit).
func (r *reservation) take(n int64) error {
	if r.b.tryTake(n) {
		r.held += n
		return nil
	}
	if r.held+n > r.b.limit {
		return errNeedsTooMuch
	}
	r.b.refused.Add(1)
	return errOverloaded
}

// give returns n bytes of the request's share.
func (r *reservation) give(n int64) {
	r.held -= n
	r.b.inUse.Add(-n)
}

// release returns the request's whole share.
func (r *reservation) release() { r.give(r.held) }
