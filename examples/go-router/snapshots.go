package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
	"strings"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// Snapshot objects in the KVIDX_SNAPSHOTS bucket are named snapPrefix followed by S, the
// stream sequence at or below which every message was applied before the snapshot began,
// written with 20 digits (zero-padded), so names sort as sequences do.
const snapPrefix = "snap-"

// snapName is the object name of a snapshot tagged with stream sequence s.
func snapName(s uint64) string { return fmt.Sprintf("%s%020d", snapPrefix, s) }

// parseSnapName returns the S of a snapshot object name, and false for any other name.
func parseSnapName(name string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, snapPrefix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	s, err := strconv.ParseUint(digits, 10, 64)
	return s, err == nil
}

// newestFirst returns the snapshot names among names, newest (highest S) first.
func newestFirst(names []string) []string {
	var out []string
	for _, n := range names {
		if _, ok := parseSnapName(n); ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// A snapshot object is the router's envelope followed by the library's snapshot
// (kvidx.Indexer.WriteSnapshot, checksummed section by section):
//
//	magic "KVRS" | version u32 (2) | S u64 | stream created i64 (Unix ns) |
//	n u32 | n x (worker id u64, dp rank u32, format u32) |
//	m u32 | m x (format u32, len u32, len bytes: that format's engine feed state) |
//	crc32 (IEEE) of all before
//
// little-endian. The envelope carries what the library's snapshot does not: the stream
// position S the consumer resumes after, the creation time of the stream S belongs to (a
// snapshot of another stream, deleted and recreated since, is refused), the publishers (with
// their wire format) so a restored router knows its routing candidates before their next
// batch arrives, and every engine feed's per-publisher tracking state after exactly the
// messages at or below S (kvidx.EngineFeed.SaveState), so a restored replica classifies each
// publisher's next batch as one that never stopped.
const (
	envelopeMagic   = "KVRS"
	envelopeVersion = 2
	// maxEnvelopePublishers bounds the publisher count read from an envelope (a corrupted
	// count must not allocate without bound).
	maxEnvelopePublishers = 1 << 24
	// maxEnvelopeFeeds bounds the feed count (one per wire format).
	maxEnvelopeFeeds = 16
)

// publisher is one (worker id, dp rank) fed from the stream, with its wire format.
type publisher struct {
	key    workerKey
	format kvidx.EngineFormat
}

// feedState is one engine feed's saved per-publisher tracking state.
type feedState struct {
	format kvidx.EngineFormat
	state  []byte
}

// envelope is the router's part of a snapshot object.
type envelope struct {
	seq uint64
	// streamCreated is the creation time of the stream (Unix ns) the sequences belong to.
	streamCreated int64
	publishers    []publisher
	feeds         []feedState
}

// errBadEnvelope reports a snapshot object whose router envelope is not valid.
var errBadEnvelope = errors.New("snapshot envelope is not valid")

// write writes the envelope.
func (e *envelope) write(w io.Writer) error {
	b := make([]byte, 0, 40+16*len(e.publishers))
	b = append(b, envelopeMagic...)
	b = binary.LittleEndian.AppendUint32(b, envelopeVersion)
	b = binary.LittleEndian.AppendUint64(b, e.seq)
	b = binary.LittleEndian.AppendUint64(b, uint64(e.streamCreated))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(e.publishers)))
	for _, p := range e.publishers {
		b = binary.LittleEndian.AppendUint64(b, p.key.ID)
		b = binary.LittleEndian.AppendUint32(b, p.key.DpRank)
		b = binary.LittleEndian.AppendUint32(b, uint32(p.format))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(e.feeds)))
	for _, f := range e.feeds {
		b = binary.LittleEndian.AppendUint32(b, uint32(f.format))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(f.state)))
		b = append(b, f.state...)
	}
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	_, err := w.Write(b)
	return err
}

// readEnvelope reads an envelope from r, leaving r at the library's snapshot. Any bad input
// (an older version included) fails with errBadEnvelope (wrapped with the reason).
func readEnvelope(r *bufio.Reader) (envelope, error) {
	var e envelope
	crc := crc32.NewIEEE()
	read := func(n int) ([]byte, error) {
		var b bytes.Buffer // grows as bytes arrive: a corrupted length cannot allocate ahead
		if _, err := io.CopyN(&b, r, int64(n)); err != nil {
			return nil, fmt.Errorf("%w: truncated (%v)", errBadEnvelope, err)
		}
		crc.Write(b.Bytes())
		return b.Bytes(), nil
	}
	head, err := read(28)
	if err != nil {
		return e, err
	}
	if string(head[:4]) != envelopeMagic {
		return e, fmt.Errorf("%w: bad magic %q", errBadEnvelope, head[:4])
	}
	if v := binary.LittleEndian.Uint32(head[4:]); v != envelopeVersion {
		return e, fmt.Errorf("%w: version %d, this router reads %d", errBadEnvelope, v, envelopeVersion)
	}
	e.seq = binary.LittleEndian.Uint64(head[8:])
	e.streamCreated = int64(binary.LittleEndian.Uint64(head[16:]))
	n := binary.LittleEndian.Uint32(head[24:])
	if n > maxEnvelopePublishers {
		return e, fmt.Errorf("%w: %d publishers", errBadEnvelope, n)
	}
	e.publishers = make([]publisher, 0, min(n, 4096))
	for range n {
		p, err := read(16)
		if err != nil {
			return e, err
		}
		e.publishers = append(e.publishers, publisher{
			key:    workerKey{ID: binary.LittleEndian.Uint64(p), DpRank: binary.LittleEndian.Uint32(p[8:])},
			format: kvidx.EngineFormat(binary.LittleEndian.Uint32(p[12:])),
		})
	}
	m, err := read(4)
	if err != nil {
		return e, err
	}
	nf := binary.LittleEndian.Uint32(m)
	if nf > maxEnvelopeFeeds {
		return e, fmt.Errorf("%w: %d feeds", errBadEnvelope, nf)
	}
	for range nf {
		h, err := read(8)
		if err != nil {
			return e, err
		}
		state, err := read(int(binary.LittleEndian.Uint32(h[4:])))
		if err != nil {
			return e, err
		}
		e.feeds = append(e.feeds, feedState{format: kvidx.EngineFormat(binary.LittleEndian.Uint32(h)), state: state})
	}
	want := crc.Sum32()
	var sum [4]byte
	if _, err := io.ReadFull(r, sum[:]); err != nil {
		return e, fmt.Errorf("%w: truncated (%v)", errBadEnvelope, err)
	}
	if got := binary.LittleEndian.Uint32(sum[:]); got != want {
		return e, fmt.Errorf("%w: checksum %08x, computed %08x", errBadEnvelope, got, want)
	}
	return e, nil
}
