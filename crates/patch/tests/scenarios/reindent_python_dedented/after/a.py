class A:
    def f(self):
        if self.ready:
            return 1
        return 0

    def g(self):
        return 2
