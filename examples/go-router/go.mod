module github.com/kvidx/kvidx/examples/go-router

go 1.26

require github.com/kvidx/kvidx/bindings/go v0.0.0

require github.com/ebitengine/purego v0.11.3 // indirect

replace github.com/kvidx/kvidx/bindings/go => ../../bindings/go
