module kvidx.test/llmd-keys

go 1.24

require github.com/fxamacker/cbor/v2 v2.10.0

require github.com/x448/float16 v0.8.4 // indirect
