package kvidx

import "runtime"

// HashTokens returns the local hash of each full block of blockSize tokens (XXH3-64, seed
// 1337, over the tokens as little-endian u32), as Dynamo-compatible publishers compute it.
// A trailing partial block is ignored; blockSize 0 fails with [ErrInvalidArgument].
func HashTokens(tokens []uint32, blockSize uint32) ([]uint64, error) {
	if err := load(); err != nil {
		return nil, err
	}
	if blockSize == 0 {
		return nil, check("HashTokens", StatusInvalidArgument)
	}
	n := len(tokens) / int(blockSize)
	out := make([]uint64, n+1) // +1: never pass a zero-length buffer
	var t *uint32
	if len(tokens) > 0 {
		t = &tokens[0]
	}
	st, got := libHashTokens(t, len(tokens), blockSize, &out[0], len(out))
	runtime.KeepAlive(tokens)
	if err := check("HashTokens", st); err != nil {
		return nil, err
	}
	return out[:got], nil
}

// SeqHashes returns the sequence hashes of a chain of local hashes: seq[0] = local[0],
// seq[i] = XXH3-64(le64(seq[i-1]) ++ le64(local[i]), seed 1337).
func SeqHashes(localHashes []uint64) ([]uint64, error) {
	if err := load(); err != nil {
		return nil, err
	}
	out := make([]uint64, len(localHashes)+1)
	var l *uint64
	if len(localHashes) > 0 {
		l = &localHashes[0]
	}
	st := libSeqHashes(l, len(localHashes), &out[0])
	runtime.KeepAlive(localHashes)
	if err := check("SeqHashes", st); err != nil {
		return nil, err
	}
	return out[:len(localHashes)], nil
}

// Version returns the library's version string, e.g. "0.1.0".
func Version() (string, error) {
	if err := load(); err != nil {
		return "", err
	}
	return libVersion(), nil
}
