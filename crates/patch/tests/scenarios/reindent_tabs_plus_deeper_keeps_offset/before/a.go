func f() {
	if x {
		y()
	}
}
