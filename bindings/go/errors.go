package kvidx

import (
	"errors"
	"strconv"
	"strings"
)

// Status is a kvidx_status code of the C ABI. Every value other than [StatusOK] is also an
// error, so the sentinels below can be matched with errors.Is.
type Status uint32

// The status codes of the C ABI v1; values are never renumbered or reused.
const (
	StatusOK              Status = 0  // success
	StatusNullPointer     Status = 1  // a required pointer was NULL
	StatusInvalidArgument Status = 2  // bad enum value, bad config value, inconsistent fields
	StatusBufferTooSmall  Status = 3  // an output buffer was too small (handled inside the binding)
	StatusParentNotFound  Status = 4  // synchronous mode only: a stored event's parent is not held
	StatusShutDown        Status = 5  // the indexer's event threads are gone
	StatusPanic           Status = 6  // an internal bug was caught at the library's boundary
	StatusPoisoned        Status = 7  // a panic happened earlier on this handle; close it
	StatusMalformed       Status = 8  // engine ingestion: the payload is not a valid batch (snapshots: not a valid snapshot)
	StatusTooLarge        Status = 9  // engine ingestion: the payload exceeds MaxEnginePayload
	StatusIO              Status = 10 // snapshots: a callback or a file failed
)

// Sentinel errors, one per failure status, for errors.Is.
var (
	ErrNullPointer     error = StatusNullPointer
	ErrInvalidArgument error = StatusInvalidArgument
	ErrBufferTooSmall  error = StatusBufferTooSmall
	ErrParentNotFound  error = StatusParentNotFound
	ErrShutDown        error = StatusShutDown
	ErrPanic           error = StatusPanic
	ErrPoisoned        error = StatusPoisoned
	ErrMalformed       error = StatusMalformed
	ErrTooLarge        error = StatusTooLarge
	ErrIO              error = StatusIO
)

// ErrClosed is returned by every method of an [Indexer] after [Indexer.Close], and of an
// [EngineFeed] after [EngineFeed.Close] (or when the indexer it is given is closed).
var ErrClosed = errors.New("kvidx: use of closed handle")

// ErrLibraryUnavailable is returned (wrapped, with the reason) when the library cannot be used:
// the purego back end could not load libkvidx or its symbols, or either back end found a
// library of another ABI version.
var ErrLibraryUnavailable = errors.New("kvidx: library unavailable")

// String describes the status in a few words.
func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusNullPointer:
		return "null pointer"
	case StatusInvalidArgument:
		return "invalid argument"
	case StatusBufferTooSmall:
		return "buffer too small"
	case StatusParentNotFound:
		return "parent block not found"
	case StatusShutDown:
		return "event threads shut down"
	case StatusPanic:
		return "internal panic caught at the boundary"
	case StatusPoisoned:
		return "handle poisoned by an earlier panic"
	case StatusMalformed:
		return "malformed input (engine payload or snapshot), nothing applied"
	case StatusTooLarge:
		return "engine payload larger than the maximum, nothing applied"
	case StatusIO:
		return "snapshot input/output failed"
	default:
		return "unknown status " + strconv.FormatUint(uint64(s), 10)
	}
}

// Error makes a Status usable as an error; it is the same text as String with a prefix.
func (s Status) Error() string { return "kvidx: " + s.String() }

// StatusError is the error of a failed library call: which operation, and the status it gave.
// It unwraps to its Status, so errors.Is(err, ErrParentNotFound) works.
type StatusError struct {
	// Op is the binding's operation, e.g. "ApplyEvent".
	Op string
	// Status is the code the library returned.
	Status Status
}

// Error returns "kvidx: Op: description (status N)".
func (e *StatusError) Error() string {
	return "kvidx: " + e.Op + ": " + e.Status.String() + " (status " +
		strconv.FormatUint(uint64(e.Status), 10) + ")"
}

// Unwrap returns the status, so errors.Is matches the sentinels.
func (e *StatusError) Unwrap() error { return e.Status }

// check turns a library status into nil or a *StatusError for op.
func check(op string, s Status) error {
	if s == StatusOK {
		return nil
	}
	return &StatusError{Op: op, Status: s}
}

// closedError reports a call on a closed indexer.
func closedError(op string) error {
	return &opError{op: op, err: ErrClosed}
}

// opError attaches an operation name to a binding-side error.
type opError struct {
	op  string
	err error
}

func (e *opError) Error() string {
	return "kvidx: " + e.op + ": " + strings.TrimPrefix(e.err.Error(), "kvidx: ")
}
func (e *opError) Unwrap() error { return e.err }
