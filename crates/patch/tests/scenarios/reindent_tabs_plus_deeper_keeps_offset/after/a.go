func f() {
	if x {
			if z {
				y()
			}
	}
}
