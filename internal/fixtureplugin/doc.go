// Command fixtureplugin is a deliberately misbehaving tool plugin for tests.
// One binary, many personalities: it picks its behaviour from the name it
// was started under (os.Args[0]'s base name, up to the first '.'), so a
// test builds it once and copies it under each name it needs.
//
// Personalities: good (a v1+v2 tool plugin), v1only, v3only, badcookie,
// stdout (prints before the handshake), hang (never handshakes), liar
// (Info contradicts any manifest), crashstart (exits at once).
// Every personality that gets as far as serving offers the tools fx.echo,
// fx.panic, fx.sleep, fx.progress, fx.exit.
//
// On start it creates the file "started-<personality>" in its working
// directory, so tests can prove a binary was never executed.
//
// It must never be shipped: it lives under internal/ and is built only by tests.
package main
