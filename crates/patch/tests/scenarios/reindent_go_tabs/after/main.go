package main

func main() {
	for i := 0; i < 3; i++ {
		if i > 0 {
			println(i)
		}
	}
}
