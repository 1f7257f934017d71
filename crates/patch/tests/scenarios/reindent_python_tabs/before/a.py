class A:
	def f(self):
		if self.x:
			return 1
		return 0
