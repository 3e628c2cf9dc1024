module github.com/kvidx/kvidx/bindings/go

go 1.26

require github.com/ebitengine/purego v0.11.3
