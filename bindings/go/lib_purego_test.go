//go:build !cgo

package kvidx

import (
	"strings"
	"testing"
)

// A library that cannot be loaded gives an error naming the variable that points at it.
func TestMissingLibraryNamesTheVariable(t *testing.T) {
	err := openLibrary([]string{"/nonexistent/libkvidx.so"})
	if err == nil || !strings.Contains(err.Error(), LibraryPathEnv) ||
		!strings.Contains(err.Error(), "/nonexistent/libkvidx.so") {
		t.Fatalf("openLibrary of a missing file: %v", err)
	}
}

func TestLibraryPathFromEnvironment(t *testing.T) {
	t.Setenv(LibraryPathEnv, "/opt/kvidx/lib/libkvidx.so.0")
	if c := libraryCandidates(); len(c) != 1 || c[0] != "/opt/kvidx/lib/libkvidx.so.0" {
		t.Fatalf("candidates %v", c)
	}
	t.Setenv(LibraryPathEnv, "")
	if c := libraryCandidates(); len(c) == 0 || !strings.HasPrefix(c[0], "libkvidx") {
		t.Fatalf("default candidates %v", c)
	}
}
