FROM python:3.11-slim
RUN pip install --no-cache-dir pytest==8.3.3
ADD https://example.com/tool.tar.gz /opt/
WORKDIR /app
COPY data/ /app/data/
RUN mkdir -p /app/output
