package kvidx

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPublicTypesPrintReadably(t *testing.T) {
	ix, err := New(Config{Backend: BackendRadix, EventThreads: 0})
	if err != nil {
		t.Fatal(err)
	}
	feed, err := NewEngineFeed(EngineVLLM, FeedNoClearOnGap|FeedAllMedia)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		value any
		want  string
	}{
		{Match{WorkerID: 7, DpRank: 0, Depth: 3}, "{WorkerID:7 DpRank:0 Depth:3}"},
		{[]Match{{WorkerID: 1, Depth: 2}}, "[{WorkerID:1 DpRank:0 Depth:2}]"},
		{Block{LocalHash: 11, SeqHash: 907}, "{LocalHash:11 SeqHash:907}"},
		{StoredEvent(3, 1, 9, []Block{{LocalHash: 11, SeqHash: 12}}).WithParent(5),
			"{Kind:stored WorkerID:3 DpRank:1 EventID:9 HasParent:true ParentSeqHash:5 " +
				"Blocks:[{LocalHash:11 SeqHash:12}] SeqHashes:[]}"},
		{Stats{EventsApplied: 4, Workers: 2, WorkerBlocks: 6},
			"{EventsApplied:4 EventsRejected:0 UnknownRemovals:0 Workers:2 WorkerBlocks:6}"},
		{FeedFlags(0), "0"},
		{FeedNoClearOnGap | FeedAllMedia, "FeedNoClearOnGap|FeedAllMedia"},
		{FeedHashTokensOnly | 1<<20, "FeedHashTokensOnly|0x100000"},
		{EngineBatchResult{EventsDecoded: 3, Seq: SeqGap, WorkerCleared: true}, "Seq:gap WorkerCleared:true}"},
		{EngineStats{Batches: 2, Gaps: 1}, "{Batches:2 BatchesMalformed:0"},
		{ix, "kvidx.Indexer(open)"},
		{feed, "kvidx.EngineFeed(open)"},
	}
	for _, c := range cases {
		got := fmt.Sprint(c.value)
		if !strings.Contains(got, c.want) || strings.Contains(got, "{{}") || strings.Contains(got, "_:") {
			t.Errorf("fmt.Sprint(%T) = %q, want %q", c.value, got, c.want)
		}
		if plus := fmt.Sprintf("%+v", c.value); plus != got {
			t.Errorf("%%+v of %T = %q, differs from %%v %q", c.value, plus, got)
		}
	}
	if got := fmt.Sprint(DefaultConfig()); !strings.HasPrefix(got, "{Backend:runs EventThreads:1 ") {
		t.Errorf("DefaultConfig prints %q", got)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if err := feed.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ix, " ", feed); got != "kvidx.Indexer(closed) kvidx.EngineFeed(closed)" {
		t.Errorf("closed handles print %q", got)
	}
	var none *Indexer
	if got := fmt.Sprint(none); got != "kvidx.Indexer(nil)" {
		t.Errorf("nil indexer prints %q", got)
	}
}

// Every exported type of the package has a String (or Error) method, so fmt never prints a
// public value as raw fields such as {{{}} 7 0 3}.
func TestEveryExportedTypeHasAStringMethod(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{}
	methods := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok && ts.Name.IsExported() && ts.Assign == 0 {
						types[ts.Name.Name] = true
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil || (d.Name.Name != "String" && d.Name.Name != "Error") {
					continue
				}
				recv := d.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					methods[id.Name] = true
				}
			}
		}
	}
	if len(types) < 10 {
		t.Fatalf("found only %d exported types: %v", len(types), types)
	}
	for name := range types {
		if !methods[name] {
			t.Errorf("exported type %s has no String method (fmt would print its raw fields)", name)
		}
	}
}
