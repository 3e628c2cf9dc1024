package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"sync"
)

// routeReadBuffer is the size of the buffer a POST /route body is read through.
const routeReadBuffer = 16 << 10

// pooledIDs is the largest id slice (in elements) kept for reuse after a request; larger ones
// are left to the garbage collector.
const pooledIDs = 64 << 10

var (
	readers   = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, routeReadBuffer) }}
	tokenBufs = sync.Pool{New: func() any { return new([]uint32) }}
	hashBufs  = sync.Pool{New: func() any { return new([]uint64) }}
)

// routeBody is a decoded POST /route body. Its slices come from pools and count against the
// request's reservation until done.
type routeBody struct {
	req    *routeRequest // nil for a JSON null
	tokens *[]uint32
	hashes *[]uint64
}

// done returns the body's slices to their pools (small ones only).
func (b *routeBody) done() {
	if b.tokens != nil && cap(*b.tokens) <= pooledIDs {
		*b.tokens = (*b.tokens)[:0]
		tokenBufs.Put(b.tokens)
	}
	if b.hashes != nil && cap(*b.hashes) <= pooledIDs {
		*b.hashes = (*b.hashes)[:0]
		hashBufs.Put(b.hashes)
	}
}

// routeDecoder reads a POST /route body as a stream: the body is never held whole, only the
// decoded ids, which grow under the request's reservation. It accepts exactly what
// strictUnmarshal into a *routeRequest accepts (an object with token_ids and local_hashes,
// each null or an array of integers in range, and lora_name, cache_salt and mm_spans;
// unknown fields and trailing data refused), with
// messages in the same terms; a read error (too large, too slow) is returned as it is.
type routeDecoder struct {
	r   *bufio.Reader
	off int64 // bytes consumed
	res *reservation
}

// decodeRouteBody decodes a POST /route body from r under res.
func decodeRouteBody(r io.Reader, res *reservation) (*routeBody, error) {
	if err := res.take(routeReadBuffer); err != nil {
		return nil, err
	}
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		readers.Put(br)
		res.give(routeReadBuffer)
	}()
	d := &routeDecoder{r: br, res: res}
	out := &routeBody{}
	err := d.body(out)
	if err == nil {
		if _, err = d.nonSpace(); err == nil {
			err = errors.New("trailing data after the JSON value")
		} else if errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if err != nil {
		out.done()
		return nil, err
	}
	return out, nil
}

// syntaxError reports invalid JSON at the last byte read.
func (d *routeDecoder) syntaxError(c byte, context string) error {
	return fmt.Errorf("invalid JSON at byte %d: invalid character %q %s", d.off, c, context)
}

// byte_ reads one byte; the end of the body in the middle of a value is an error.
func (d *routeDecoder) byte_() (byte, error) {
	c, err := d.r.ReadByte()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return 0, errors.New("the body ends in the middle of a JSON value")
		}
		return 0, err
	}
	d.off++
	return c, nil
}

// nonSpace reads the next byte that is not JSON whitespace; at the end of the body it returns
// io.EOF itself.
func (d *routeDecoder) nonSpace() (byte, error) {
	for {
		c, err := d.r.ReadByte()
		if err != nil {
			return 0, err
		}
		d.off++
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
	}
}

// next is nonSpace inside a value: the end of the body is an error.
func (d *routeDecoder) next() (byte, error) {
	c, err := d.nonSpace()
	if errors.Is(err, io.EOF) {
		return 0, errors.New("the body ends in the middle of a JSON value")
	}
	return c, err
}

// literal reads the rest of a literal (null, true, false) whose first byte was read.
func (d *routeDecoder) literal(rest string) error {
	for i := range len(rest) {
		c, err := d.byte_()
		if err != nil {
			return err
		}
		if c != rest[i] {
			return d.syntaxError(c, "in literal")
		}
	}
	return nil
}

// kind names the JSON value starting with c, for type errors.
func kind(c byte) string {
	switch {
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == '"':
		return "string"
	case c == 't' || c == 'f':
		return "bool"
	case c == 'n':
		return "null"
	default:
		return "number"
	}
}

// body reads the top-level value: null or the request object.
func (d *routeDecoder) body(out *routeBody) error {
	c, err := d.nonSpace()
	switch {
	case errors.Is(err, io.EOF):
		return errors.New("the body is empty")
	case err != nil:
		return err
	case c == 'n':
		return d.literal("ull")
	case c != '{':
		if !isValueStart(c) {
			return d.syntaxError(c, "looking for beginning of value")
		}
		return fmt.Errorf("the body: expected an object, got %s", kind(c))
	}
	out.req = &routeRequest{}
	if c, err = d.next(); err != nil || c == '}' {
		return err
	}
	for {
		if c != '"' {
			return d.syntaxError(c, "looking for beginning of object key string")
		}
		key, err := d.str()
		if err != nil {
			return err
		}
		if c, err = d.next(); err != nil {
			return err
		}
		if c != ':' {
			return d.syntaxError(c, "after object key")
		}
		switch key {
		case "token_ids":
			out.tokens = tokenBufs.Get().(*[]uint32)
			out.req.TokenIDs, err = decodeIDs(d, key, out.tokens)
		case "local_hashes":
			out.hashes = hashBufs.Get().(*[]uint64)
			out.req.LocalHashes, err = decodeIDs(d, key, out.hashes)
		case "lora_name":
			err = d.small(&out.req.LoRAName)
		case "cache_salt":
			err = d.small(&out.req.CacheSalt)
		case "mm_spans":
			err = d.small(&out.req.MMSpans)
		default:
			return fmt.Errorf("unknown field %q", key)
		}
		if err != nil {
			return err
		}
		if c, err = d.next(); err != nil {
			return err
		}
		switch c {
		case '}':
			return nil
		case ',':
			if c, err = d.next(); err != nil {
				return err
			}
		default:
			return d.syntaxError(c, "after object key:value pair")
		}
	}
}

// small decodes the next value into v as strictUnmarshal would: for the fields that are not
// id arrays (a namespace, multimodal spans), read whole under the request's reservation.
func (d *routeDecoder) small(v any) error {
	raw, err := d.rawValue()
	defer d.res.give(int64(cap(raw)))
	if err != nil {
		return err
	}
	return strictUnmarshal(raw, v)
}

// rawValue reads the bytes of the next JSON value (syntax is left to strictUnmarshal): an
// object or array up to its matching close, a string up to its closing quote, anything else
// up to the next delimiter, which is left unread.
func (d *routeDecoder) rawValue() ([]byte, error) {
	raw := make([]byte, 0, 64)
	if err := d.res.take(int64(cap(raw))); err != nil {
		return nil, err
	}
	push := func(c byte) error {
		if len(raw) == cap(raw) { // double, exactly: cap(raw) is what is reserved
			if err := d.res.take(int64(cap(raw))); err != nil {
				return err
			}
			raw = append(make([]byte, 0, 2*cap(raw)), raw...)
		}
		raw = append(raw, c)
		return nil
	}
	c, err := d.next()
	if err != nil {
		return raw, err
	}
	depth, inString, escaped := 0, false, false
	for {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			_ = d.r.UnreadByte()
			d.off--
			return raw, nil
		}
		if depth < 0 { // the close of the enclosing object: not part of the value
			_ = d.r.UnreadByte()
			d.off--
			return raw, nil
		}
		if err := push(c); err != nil {
			return raw, err
		}
		if depth == 0 && !inString && (c == '"' || c == '}' || c == ']') {
			return raw, nil
		}
		if c, err = d.byte_(); err != nil {
			return raw, err
		}
	}
}

func isValueStart(c byte) bool {
	return c == '{' || c == '[' || c == '"' || c == 't' || c == 'f' || c == 'n' || c == '-' || c >= '0' && c <= '9'
}

// maxKey is the longest object key kept whole (longer ones are unknown fields anyway).
const maxKey = 64

// str reads a string whose opening quote was read.
func (d *routeDecoder) str() (string, error) {
	raw := []byte{'"'}
	escaped := false
	for {
		c, err := d.byte_()
		if err != nil {
			return "", err
		}
		if len(raw) <= maxKey {
			raw = append(raw, c)
		}
		switch {
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			if raw[len(raw)-1] != '"' { // cut: too long to be a field of the request
				return string(raw[1:]) + "...", nil
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", fmt.Errorf("invalid JSON at byte %d: bad string", d.off)
			}
			return s, nil
		}
	}
}

// decodeIDs reads null or an array of integers that fit T into *buf (reused, grown under the
// reservation). It returns nil for null, an empty non-nil slice for [].
func decodeIDs[T uint32 | uint64](d *routeDecoder, field string, buf *[]T) ([]T, error) {
	size := int64(reflect.TypeFor[T]().Size())
	maxV := uint64(math.MaxUint64) >> (64 - 8*size)
	c, err := d.next()
	switch {
	case err != nil:
		return nil, err
	case c == 'n':
		return nil, d.literal("ull")
	case c != '[':
		if !isValueStart(c) {
			return nil, d.syntaxError(c, "looking for beginning of value")
		}
		return nil, fmt.Errorf("%s: expected an array, got %s", field, kind(c))
	}
	ids := (*buf)[:0]
	if ids == nil {
		ids = []T{} // [] is an empty request, not a missing field
	}
	if err := d.res.take(int64(cap(ids)) * size); err != nil {
		return nil, err
	}
	defer func() { *buf = ids }()
	if c, err = d.next(); err != nil || c == ']' {
		return ids, err
	}
	var num []byte
	for {
		if c != '-' && (c < '0' || c > '9') {
			if !isValueStart(c) {
				return nil, d.syntaxError(c, "looking for beginning of value")
			}
			return nil, fmt.Errorf("%s: expected an integer in [0, %d], got %s", field, maxV, kind(c))
		}
		num = append(num[:0], c)
		for {
			c, err = d.byte_()
			if err != nil {
				return nil, err
			}
			if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
				break
			}
			if len(num) < 64 {
				num = append(num, c)
			}
		}
		v, perr := strconv.ParseUint(string(num), 10, int(8*size))
		if perr != nil || (len(num) > 1 && num[0] == '0') {
			return nil, fmt.Errorf("%s: expected an integer in [0, %d], got number %s", field, maxV, num)
		}
		if len(ids) == cap(ids) {
			grown := max(2*cap(ids), 1024)
			if err := d.res.take(int64(grown) * size); err != nil {
				return nil, err
			}
			next := make([]T, len(ids), grown)
			copy(next, ids)
			d.res.give(int64(cap(ids)) * size)
			ids = next
		}
		ids = append(ids, T(v))
		for c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			if c, err = d.byte_(); err != nil {
				return nil, err
			}
		}
		switch c {
		case ']':
			return ids, nil
		case ',':
			if c, err = d.next(); err != nil {
				return nil, err
			}
		default:
			return nil, d.syntaxError(c, "after array element")
		}
	}
}
