package kvidx

import (
	"fmt"
	"reflect"
	"strings"
)

// fieldsString formats a struct as {Name:value ...} like fmt's %+v, but leaves out blank
// (layout marker) fields and formats each value with its own String method when it has one.
// It lists whatever exported fields the struct has, so a field added later shows up too.
func fieldsString(v any) string {
	rv := reflect.ValueOf(v)
	rt := rv.Type()
	var b strings.Builder
	b.WriteByte('{')
	first := true
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		if !f.IsExported() {
			continue
		}
		if !first {
			b.WriteByte(' ')
		}
		first = false
		b.WriteString(f.Name)
		b.WriteByte(':')
		fmt.Fprint(&b, rv.Field(i).Interface())
	}
	b.WriteByte('}')
	return b.String()
}

// String formats the config as {Backend:positional EventThreads:1 ...}.
func (c Config) String() string { return fieldsString(c) }

// String formats the block as {LocalHash:N SeqHash:N}.
func (b Block) String() string { return fieldsString(b) }

// String formats the event as {Kind:stored WorkerID:N ...} with its blocks or names.
func (e Event) String() string { return fieldsString(e) }

// String formats the match as {WorkerID:N DpRank:N Depth:N}.
func (m Match) String() string { return fieldsString(m) }

// String formats the counters as {EventsApplied:N ...}.
func (s Stats) String() string { return fieldsString(s) }

// String formats the batch result as {EventsDecoded:N ... Seq:in order WorkerCleared:false}.
func (r EngineBatchResult) String() string { return fieldsString(r) }

// String formats the feed counters as {Batches:N ...}.
func (s EngineStats) String() string { return fieldsString(s) }

// String prints the start statistics field by field.
func (s EngineStartStats) String() string { return fieldsString(s) }

// feedFlagNames names the FeedFlags bits, lowest first.
var feedFlagNames = []struct {
	flag FeedFlags
	name string
}{
	{FeedNoClearOnGap, "FeedNoClearOnGap"},
	{FeedNoClearOnRestart, "FeedNoClearOnRestart"},
	{FeedAllMedia, "FeedAllMedia"},
	{FeedAllGroups, "FeedAllGroups"},
	{FeedHashTokensOnly, "FeedHashTokensOnly"},
	{FeedUnknownMediumDevice, "FeedUnknownMediumDevice"},
	{FeedUnknownMediumHost, "FeedUnknownMediumHost"},
	{FeedUnknownMediumDisk, "FeedUnknownMediumDisk"},
	{FeedSkipExtras, "FeedSkipExtras"},
}

// String returns the set flags joined by "|" (unknown bits as a hex number), or "0".
func (f FeedFlags) String() string {
	if f == 0 {
		return "0"
	}
	var parts []string
	for _, n := range feedFlagNames {
		if f&n.flag != 0 {
			parts = append(parts, n.name)
			f &^= n.flag
		}
	}
	if f != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(f)))
	}
	return strings.Join(parts, "|")
}

// String returns "kvidx.Indexer(open)" or "kvidx.Indexer(closed)".
func (ix *Indexer) String() string {
	if ix == nil {
		return "kvidx.Indexer(nil)"
	}
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return "kvidx.Indexer(closed)"
	}
	return "kvidx.Indexer(open)"
}

// String returns "kvidx.EngineFeed(open)" or "kvidx.EngineFeed(closed)".
func (f *EngineFeed) String() string {
	if f == nil {
		return "kvidx.EngineFeed(nil)"
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.h == nilFeed {
		return "kvidx.EngineFeed(closed)"
	}
	return "kvidx.EngineFeed(open)"
}
