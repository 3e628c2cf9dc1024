package main

import (
	"slices"
	"strings"
	"testing"
)

// The streaming POST /route decoder accepts exactly what strictUnmarshal into a
// *routeRequest accepts, with the same values.
func TestRouteBodyDecoderMatchesStrictUnmarshal(t *testing.T) {
	for _, body := range []string{
		`{"token_ids": [1, 2, 3]}`, ` { "local_hashes" : [ 18446744073709551615 , 0 ] } `, `null`, ` null `, `{}`,
		`{"token_ids": null}`, `{"token_ids": []}`, `{"token_ids": [4294967295]}`, `{"token_ids": [4294967296]}`,
		`{"token_ids": [-1]}`, `{"token_ids": [1.5]}`, `{"token_ids": [1e2]}`, `{"token_ids": [01]}`,
		`{"token_ids": ["1"]}`, `{"token_ids": [[1]]}`, `{"token_ids": [1,]}`, `{"token_ids": [1 2]}`,
		`{"token_ids": 1}`, `{"token_ids": {}}`, `{"tok\u0065n_ids": [7]}`, `{"bogus": 1}`, `{"token_ids": [1]} x`,
		`{"token_ids": [1]}{}`, `{"token_ids": [1]`, `{"token_ids": [1`, `{"token_ids"`, ``, `   `, `[1, 2]`,
		`"x"`, `true`, `7`, `nul`, `{"token_ids": [1], "local_hashes": [2]}`, `{token_ids: [1]}`,
		`{"token_ids": [1], }`, "{\"token_ids\":\t[1,\n2]\r}",
		`{"token_ids": [1], "lora_name": "a", "cache_salt": "s\"}"}`, `{"lora_name": null}`, `{"cache_salt": 7}`,
		`{"mm_spans": [{"identifier": "img", "start": 1, "end": 5}]}`, `{"mm_spans": null, "token_ids": [1]}`,
		`{"mm_spans": [{"identifier": "img", "bogus": 1}]}`, `{"mm_spans": [{"start": -1}]}`, `{"mm_spans": {}}`,
		`{"mm_spans": [[]]}`, `{"mm_spans": [}`, `{"lora_name": "a"`, `{"lora_name":}`, `{"lora_name": nul}`,
		`{"lora_name": "a" "b"}`, `{"cache_salt": "x",}`, `{"mm_spans": [ ] , "lora_name" : "l" }`,
	} {
		var want *routeRequest
		wantErr := strictUnmarshal([]byte(body), &want)
		got, gotErr := decodeRouteBody(strings.NewReader(body), newByteBudget(1<<20).reserve())
		if (wantErr == nil) != (gotErr == nil) {
			t.Errorf("%q: stream decoder error %v, strictUnmarshal error %v", body, gotErr, wantErr)
			continue
		}
		if wantErr != nil {
			continue
		}
		switch {
		case (want == nil) != (got.req == nil):
			t.Errorf("%q: stream decoder %+v, strictUnmarshal %+v", body, got.req, want)
		case want != nil && (!slices.Equal(want.TokenIDs, got.req.TokenIDs) || (want.TokenIDs == nil) != (got.req.TokenIDs == nil) ||
			!slices.Equal(want.LocalHashes, got.req.LocalHashes) || (want.LocalHashes == nil) != (got.req.LocalHashes == nil) ||
			want.LoRAName != got.req.LoRAName || want.CacheSalt != got.req.CacheSalt ||
			!slices.Equal(want.MMSpans, got.req.MMSpans) || (want.MMSpans == nil) != (got.req.MMSpans == nil)):
			t.Errorf("%q: stream decoder %+v, strictUnmarshal %+v", body, *got.req, *want)
		}
		got.done()
	}
}
