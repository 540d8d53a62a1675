// Command hello is testbin's own test binary.
package main

import "fmt"

var greeting = "hello"

func main() { fmt.Println(greeting) }
