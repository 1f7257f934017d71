class A:
	def f(self):
		if self.x:
			y = self.x * 2
			return y
		return 0
