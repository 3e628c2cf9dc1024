package kvidx

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// hashCheckFixture returns a payload of tests/fixtures/hash_check, made by vLLM 0.33.0's own
// block hasher (scripts/gen_hash_check_fixtures.py).
func hashCheckFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "tests", "fixtures", "hash_check", name+".msgpack"))
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return b
}

func TestHashCheckCountsTheEnginesOwnHashes(t *testing.T) {
	ix := mustNew(t, Config{EventThreads: 0})
	f := mustFeed(t, EngineVLLM, 0)
	if _, err := f.HashCheckTotals(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("HashCheckTotals with the check off: %v", err)
	}
	if err := f.SetHashCheck(HashVllmSha256Cbor, VllmDefaultSeed, 16); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		payload := hashCheckFixture(t, "vllm_sha256_cbor_default_"+strconv.Itoa(i))
		if _, err := f.Apply(ix, 3, 0, nil, payload); err != nil {
			t.Fatal(err)
		}
	}
	s, err := f.HashCheckStats(3, 0)
	if err != nil {
		t.Fatal(err)
	}
	// 16 blocks recomputed and matched; the LoRA store's 4 need the adapter's path.
	if s.Matched != 16 || s.Mismatched != 0 || s.Unverifiable != 4 {
		t.Fatalf("stats %+v", s)
	}
	// A router told the wrong block size: the first batch already mismatches.
	if err := f.SetHashCheck(HashVllmSha256Cbor, VllmDefaultSeed, 32); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Apply(ix, 3, 0, nil, hashCheckFixture(t, "vllm_sha256_cbor_default_0")); err != nil {
		t.Fatal(err)
	}
	if s, err = f.HashCheckTotals(); err != nil || s.Matched != 0 || s.Mismatched != 5 {
		t.Fatalf("wrong block size: %+v, %v", s, err)
	}
	if err := f.SetHashCheck(HashAlgorithm(9), "", 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("unknown algorithm: %v", err)
	}
	if err := f.ClearHashCheck(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.HashCheckStats(3, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("stats after ClearHashCheck: %v", err)
	}
}

// The golden keys of tests/fixtures/llmd_keys.txt, written by the independent Go
// implementation of tests/llmd-keys.
func TestLlmdRequestKeysMatchTheGoldenFile(t *testing.T) {
	file, err := os.Open(filepath.Join("..", "..", "tests", "fixtures", "llmd_keys.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	cases := 0
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		seed, rest := unquote(t, line)
		model, rest := unquote(t, rest)
		var bs, first, n uint32
		var keys string
		fields := strings.Fields(rest)
		if len(fields) != 4 {
			t.Fatalf("line %q", line)
		}
		for i, dst := range []*uint32{&bs, &first, &n} {
			v, err := strconv.ParseUint(fields[i], 10, 32)
			if err != nil {
				t.Fatal(err)
			}
			*dst = uint32(v)
		}
		keys = fields[3]
		tokens := make([]uint32, n)
		for i := range tokens {
			tokens[i] = first + uint32(i)
		}
		got, err := LlmdRequestKeys(tokens, bs, seed, model)
		if err != nil {
			t.Fatal(err)
		}
		hex := make([]string, len(got))
		for i, k := range got {
			hex[i] = strconv.FormatUint(k, 16)
			hex[i] = strings.Repeat("0", 16-len(hex[i])) + hex[i]
		}
		if strings.Join(hex, ",") != keys {
			t.Errorf("seed %q model %q: got %s, want %s", seed, model, strings.Join(hex, ","), keys)
		}
		cases++
	}
	if cases < 8 {
		t.Fatalf("%d cases", cases)
	}
	if _, err := LlmdRequestKeys([]uint32{1}, 0, "", ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("block size 0: %v", err)
	}
}

func unquote(t *testing.T, s string) (string, string) {
	t.Helper()
	prefix, err := strconv.QuotedPrefix(strings.TrimLeft(s, " "))
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	text, err := strconv.Unquote(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return text, strings.TrimLeft(s, " ")[len(prefix):]
}

func TestAnLlmdFeedAnswersLlmdKeys(t *testing.T) {
	ix := mustNew(t, Config{EventThreads: 0})
	f := mustFeed(t, EngineVLLM, 0)
	if err := f.SetLlmdKeys("", "base-model"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Apply(ix, 3, 0, nil, hashCheckFixture(t, "vllm_sha256_cbor_default_0")); err != nil {
		t.Fatal(err)
	}
	var tokens []uint32
	for tok := uint32(1000); tok < 1064; tok++ {
		tokens = append(tokens, tok)
	}
	for tok := uint32(1); tok <= 16; tok++ {
		tokens = append(tokens, tok)
	}
	for model, want := range map[string]uint32{"base-model": 5, "other": 0} {
		keys, err := LlmdRequestKeys(tokens, 16, "", model)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ix.FindMatches(keys)
		if err != nil {
			t.Fatal(err)
		}
		var depth uint32
		if len(m) == 1 {
			depth = m[0].Depth
		}
		if depth != want {
			t.Errorf("model %q: depth %d, want %d (%v)", model, depth, want, m)
		}
	}
}
