package llmdkeys

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var write = flag.Bool("write", false, "rewrite the golden file instead of comparing with it")

const golden = "../fixtures/llmd_keys.txt"

type testCase struct {
	seed, model string
	blockSize   int
	first, n    uint32 // tokens first .. first+n-1
}

// The cases of the golden file: seeds and models (empty, ASCII, non-ASCII, long enough for
// a 2-byte CBOR length), block sizes, token values across every CBOR integer width.
var cases = []testCase{
	{"", "", 16, 1, 32},
	{"", "meta-llama/Llama-3.1-8B-Instruct", 16, 1, 48},
	{"0", "meta-llama/Llama-3.1-8B-Instruct", 16, 1, 48},
	{"12345", "sql-adapter", 4, 20, 10},
	{"", "mödel-ü", 1, 23, 3},
	{"seed", strings.Repeat("m", 300), 8, 250, 16},
	{"", "m", 2, 65530, 10},
	{"", "m", 2, 4294967290, 6},
}

func tokens(c testCase) []uint32 {
	out := make([]uint32, c.n)
	for i := range out {
		out[i] = c.first + uint32(i)
	}
	return out
}

func line(c testCase) string {
	keys := RequestKeys(tokens(c), c.blockSize, c.seed, c.model)
	hex := make([]string, len(keys))
	for i, k := range keys {
		hex[i] = fmt.Sprintf("%016x", k)
	}
	return fmt.Sprintf("%q %q %d %d %d %s", c.seed, c.model, c.blockSize, c.first, c.n, strings.Join(hex, ","))
}

func TestGolden(t *testing.T) {
	var want []string
	for _, c := range cases {
		want = append(want, line(c))
	}
	if *write {
		text := "# seed model block_size first_token num_tokens keys (hex, in block order)\n" +
			strings.Join(want, "\n") + "\n"
		if err := os.WriteFile(golden, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(golden)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if l := s.Text(); l != "" && !strings.HasPrefix(l, "#") {
			got = append(got, l)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("golden file has %d cases, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("case %d:\n got  %s\n want %s", i, got[i], want[i])
		}
	}
}

// The root key is the hash of [FNV-64a(seed), null, model]: checked byte by byte.
func TestRootEncoding(t *testing.T) {
	b, err := canonical.Marshal([]interface{}{fnv64a(nil), []uint32(nil), "m"})
	if err != nil {
		t.Fatal(err)
	}
	want := "831bcbf29ce484222325f6616d"
	if got := fmt.Sprintf("%x", b); got != want {
		t.Fatalf("root CBOR %s, want %s", got, want)
	}
}
